// The collector routes the gateway's node jobs and mutations to the executor and back, on real
// gRPC: the demo gateway (signing as the platform would) -> the collector's GatewayStream and
// session -> the node job router -> a real executor on a real Unix socket. What this file proves
// needs no API server (every answer here is decided before the executor would call one); the
// jobs that reach a cluster are in test/integration/node-jobs-gateway.test.ts.
import { KubeConfig } from '@kubernetes/client-node';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createNodeJobRouter,
  noExecutorHandler,
  type NodeJobRouter,
} from '../../collector/executor-client/node-job-router.js';
import type { NodeJobAnswer, NodeJobHandler } from '../../collector/gateway/session.js';
import { startHarness, stateItem, until, type Harness } from '../helpers/gateway-harness.js';
import { startTestExecutor, type TestExecutor } from '../helpers/node-job-executor.js';

const unreachableCluster = () => {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'none', server: 'https://127.0.0.1:9', skipTLSVerify: true }],
    users: [{ name: 'none', token: 'none' }],
    contexts: [{ name: 'none', cluster: 'none', user: 'none' }],
    currentContext: 'none',
  });
  return kc;
};

const WRITE_CAPS = { logs: true, state: true, metrics: false, nodeJobs: true, mutations: true };

async function harnessWith(handler: NodeJobHandler, caps = WRITE_CAPS): Promise<Harness> {
  return startHarness({
    stream: {
      identity: {
        tenantToken: 'tenant-secret-0123456789',
        agentVersion: '0.1.0-test',
        clusterId: '6f1c2a4e-0000-4000-8000-000000000001',
        agentId: 'agent-under-test',
        capabilities: caps,
      },
    },
    deps: { nodeJobHandler: handler },
  });
}

let executor: TestExecutor;
let router: NodeJobRouter;
let h: Harness;

describe('node jobs and mutations routed by the collector', () => {
  beforeAll(async () => {
    // Bound late: the executor trusts the harness's demo gateway key, made with the harness.
    h = await harnessWith((request, answer) => {
      router.handle(request, answer);
    });
    // The executor's own config: node jobs and mutations off; its guard still verifies first.
    executor = await startTestExecutor({
      kc: unreachableCluster(),
      configYaml: 'mutate:\n  enabled: false\n  node:\n    enabled: false\n',
      // The demo gateway signs as the platform would.
      trustKey: h.gateway.commandSigner,
    });
    // The router reaches the executor's socket; audit records go into the harness's buffer.
    router = createNodeJobRouter({
      socketPath: executor.socketPath,
      logger: pino({ level: 'silent' }),
      enqueue: (item) => {
        h.buffer.enqueue(item);
      },
    });
  });

  afterAll(async () => {
    await router.service.close();
    await executor.close();
    await h[Symbol.asyncDispose]();
  });

  it("brings the executor's refusal back with its code and reason, and the audit record through the buffer", async () => {
    const session = await h.gateway.waitForSession();
    const job = h.gateway.nodeJobs.run(session.sessionId, { node: 'kwok-node-0', verb: 'cordon' });
    expect(job.state).toBe('sent');
    const done = await h.gateway.nodeJobs.waitForDone(job.id, 20_000);
    expect(done.done).toMatchObject({ outcome: 'refused', refusalCode: 'GATE_DISABLED' });
    expect(done.done?.message).toContain('gate is off');
    await until(
      () => h.gateway.nodeJobs.audits.some((a) => a.requestId === job.id),
      'the audit record',
    );
    expect(h.gateway.nodeJobs.audits.find((a) => a.requestId === job.id)).toMatchObject({
      event: 'node_job',
      verb: 'cordon',
      target: 'node/kwok-node-0',
      outcome: 'refused',
      refusalCode: 'GATE_DISABLED',
      // Verified before the gate: the refusal names who asked.
      principal: 'demo-user@kubexa.local',
    });
  });

  it('refuses an unsigned request with its code on the wire', async () => {
    const session = await h.gateway.waitForSession();
    const job = h.gateway.nodeJobs.run(session.sessionId, {
      node: 'kwok-node-0',
      verb: 'drain',
      unsigned: true,
    });
    const done = await h.gateway.nodeJobs.waitForDone(job.id, 20_000);
    expect(done.done).toMatchObject({ outcome: 'refused', refusalCode: 'SIGNATURE_INVALID' });
    expect(done.done?.message).not.toBe('');
    const mutation = await h.gateway.nodeJobs.mutate(session.sessionId, {
      verb: 'delete',
      version: 'v1',
      resource: 'configmaps',
      namespace: 'default',
      name: 'x',
      unsigned: true,
    });
    expect(mutation).toMatchObject({ refusalCode: 'SIGNATURE_INVALID', status: 'Failure' });
    expect(mutation.refusalReason).not.toBe('');
  });

  it('answers beside the buffer: a result arrives while bulk data waits behind a throttle, the audit record after it', async () => {
    const session = await h.gateway.waitForSession();
    // The gateway throttles the drain; the harness's clock never advances, so nothing buffered
    // leaves until the throttle is lifted.
    h.gateway.sendBackpressure(session.sessionId, { throttle: true, delayMs: 60_000 });
    await until(
      () => h.logs.lines.filter((l) => l.msg === 'gateway backpressure').length === 1,
      'the throttle',
    );
    for (let i = 0; i < 500; i++) h.buffer.enqueue(stateItem(10_000 + i));
    const stored = h.gateway.store.count('state');
    const job = h.gateway.nodeJobs.run(session.sessionId, { node: 'kwok-node-1', verb: 'drain' });
    const done = await h.gateway.nodeJobs.waitForDone(job.id, 20_000);
    expect(done.done?.refusalCode).toBe('GATE_DISABLED');
    // The result did not wait for the 500 items: none of them has left the buffer yet, and the
    // audit record (durable, in order) waits behind them.
    expect(h.gateway.store.count('state')).toBe(stored);
    await until(() => h.buffer.stats().pending === 501, 'the audit record in the buffer');
    expect(h.gateway.nodeJobs.audits.some((a) => a.requestId === job.id)).toBe(false);
    h.gateway.sendBackpressure(session.sessionId, { throttle: false, delayMs: 0 });
    await until(
      () => h.gateway.nodeJobs.audits.some((a) => a.requestId === job.id),
      'the audit record after the throttle',
    );
    expect(h.gateway.store.count('state')).toBe(stored + 500);
  });
});

describe('where answers go', () => {
  it('answers only the session that asked: once it has ended, answers are dropped, never sent to the next one', async () => {
    let held: ((payload: NodeJobAnswer) => boolean) | undefined;
    const holding: NodeJobHandler = (_request, answer) => {
      held = answer;
    };
    const harness = await harnessWith(holding);
    try {
      const first = await harness.gateway.waitForSession();
      const job = harness.gateway.nodeJobs.run(first.sessionId, {
        node: 'kwok-node-0',
        verb: 'cordon',
      });
      await until(() => held !== undefined, 'the request at the handler');
      harness.gateway.kick(first.sessionId);
      await harness.clock.waitForSleep((ms) => ms === 100);
      harness.clock.advance(100);
      const second = await harness.gateway.waitForSession(
        (s) => s.state === 'connected' && s.sessionId !== first.sessionId,
      );
      const done: NodeJobAnswer = {
        $case: 'nodeJobEvent',
        value: {
          jobId: job.id,
          event: {
            $case: 'done',
            value: {
              outcome: 'succeeded',
              refusalCode: '',
              message: '',
              cordoned: true,
              pending: [],
              evictedCount: 0,
              skippedCount: 0,
              refusedCount: 0,
            },
          },
        },
      };
      expect(held?.(done)).toBe(false);
      // Nothing reached the gateway on either session.
      expect(harness.gateway.store.count('nodeJobEvent')).toBe(0);
      expect(second.sessionId).not.toBe(first.sessionId);
    } finally {
      await harness[Symbol.asyncDispose]();
    }
  });

  it('a gateway never sends node jobs to an agent that did not advertise them', async () => {
    let requests = 0;
    const harness = await harnessWith(
      () => {
        requests++;
      },
      { logs: true, state: true, metrics: false, nodeJobs: false, mutations: false },
    );
    try {
      const session = await harness.gateway.waitForSession();
      const job = harness.gateway.nodeJobs.run(session.sessionId, {
        node: 'kwok-node-0',
        verb: 'cordon',
      });
      expect(job.state).toBe('not_sent');
      await expect(
        harness.gateway.nodeJobs.mutate(session.sessionId, {
          verb: 'delete',
          version: 'v1',
          resource: 'configmaps',
          name: 'x',
        }),
      ).rejects.toThrow(/cannot take mutations/);
      expect(requests).toBe(0);
    } finally {
      await harness[Symbol.asyncDispose]();
    }
  });

  it('answers EXECUTOR_UNAVAILABLE when no executor is deployed', async () => {
    const harness = await harnessWith(noExecutorHandler);
    try {
      const session = await harness.gateway.waitForSession();
      const job = harness.gateway.nodeJobs.run(session.sessionId, {
        node: 'kwok-node-0',
        verb: 'cordon',
      });
      const done = await harness.gateway.nodeJobs.waitForDone(job.id, 20_000);
      expect(done.done).toMatchObject({ outcome: 'failed', refusalCode: 'EXECUTOR_UNAVAILABLE' });
      expect(done.done?.message).toContain('no executor');
    } finally {
      await harness[Symbol.asyncDispose]();
    }
  });
});
