// The collector's relay for node jobs and mutations against a real executor on a real Unix
// socket: the signed command passes untouched, the executor's refusal comes back as the gateway's
// NodeJobEvent / MutationResult with its code, with an AuditRecord, and an executor that cannot
// be reached gives EXECUTOR_UNAVAILABLE rather than silence. (No API server is needed: every
// answer here is decided before the executor calls it.)
import { credentials } from '@grpc/grpc-js';
import { KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  EXECUTOR_UNAVAILABLE,
  relayMutation,
  relayNodeJob,
  type RelayedPayload,
} from '../../collector/executor-client/node-job-relay.js';
import { ExecutorServiceClient, NodeJobOutcome, PodPhase } from '../../proto/index.js';
import { toGatewayEvents } from '../../collector/executor-client/node-job-relay.js';
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

let gateOff: TestExecutor;

beforeAll(async () => {
  gateOff = await startTestExecutor({
    kc: unreachableCluster(),
    configYaml: 'mutate:\n  enabled: false\n  node:\n    enabled: false\n',
  });
});

afterAll(async () => {
  await gateOff.close();
});

describe('node job and mutation relay', () => {
  it("relays a node job untouched and brings back the executor's refusal and audit record", async () => {
    const request = gateOff.nodeJob('node-1', 'drain');
    const out: RelayedPayload[] = [];
    await relayNodeJob(
      gateOff.client,
      {
        requestId: request.requestId,
        signedCommand: request.command?.jws ?? '',
        node: 'node-1',
        verb: 'drain',
        dryRun: false,
        force: true,
        deleteEmptydirData: false,
        gracePeriodSeconds: undefined,
        timeoutSeconds: 60,
        podSelector: '',
      },
      (payload) => out.push(payload),
      new AbortController().signal,
    );
    expect(out.map((p) => p.$case)).toEqual(['nodeJobEvent', 'auditRecord']);
    const done = out[0]?.$case === 'nodeJobEvent' ? out[0].value.event : undefined;
    expect(done).toMatchObject({
      $case: 'done',
      value: { outcome: 'refused', refusalCode: 'GATE_DISABLED' },
    });
    expect(out[1]).toMatchObject({
      value: {
        // The signature is verified before the gate: the refusal names who asked.
        principal: 'ops@example.com',
        verb: 'drain',
        event: 'node_job',
        outcome: 'refused',
        target: 'node/node-1',
      },
    });
  });

  it('relays a mutation and maps the refusal', async () => {
    const request = gateOff.mutation({ verb: 'delete', namespace: 'a', name: 'b' });
    const out: RelayedPayload[] = [];
    await relayMutation(
      gateOff.client,
      {
        requestId: request.requestId,
        signedCommand: request.command?.jws ?? '',
        verb: 'delete',
        group: '',
        version: 'v1',
        resource: 'configmaps',
        namespace: 'a',
        name: 'b',
        body: Buffer.alloc(0),
        patchType: '',
        replicas: 0,
        propagationPolicy: '',
        dryRun: false,
        fieldManager: '',
        force: false,
      },
      (payload) => out.push(payload),
    );
    expect(out[0]).toMatchObject({
      $case: 'mutationResult',
      value: { refusalCode: 'GATE_DISABLED', status: 'Failure' },
    });
    expect(out[1]).toMatchObject({
      $case: 'auditRecord',
      value: { event: 'mutation', principal: 'ops@example.com', refusalCode: 'GATE_DISABLED' },
    });
  });

  it('answers EXECUTOR_UNAVAILABLE when the executor cannot be reached', async () => {
    const client = new ExecutorServiceClient(
      'unix:///nonexistent/executor.sock',
      credentials.createInsecure(),
    );
    const out: RelayedPayload[] = [];
    await relayNodeJob(
      client,
      {
        requestId: 'r1',
        signedCommand: 'x',
        node: 'n',
        verb: 'cordon',
        dryRun: false,
        force: false,
        deleteEmptydirData: false,
        gracePeriodSeconds: undefined,
        timeoutSeconds: 0,
        podSelector: '',
      },
      (payload) => out.push(payload),
      new AbortController().signal,
    );
    client.close();
    expect(out).toHaveLength(1);
    expect(out[0]).toMatchObject({
      value: {
        jobId: 'r1',
        event: { $case: 'done', value: { outcome: 'failed', refusalCode: EXECUTOR_UNAVAILABLE } },
      },
    });
  });

  it('names pod phases and outcomes as words on the gateway wire', () => {
    const [pod] = toGatewayEvents('j', {
      event: {
        $case: 'pod',
        value: {
          namespace: 'ns',
          name: 'p',
          phase: PodPhase.POD_PHASE_BLOCKED_BY_PDB,
          reason: 'TooManyRequests',
          pdb: 'web-pdb',
          message: 'm',
          atUnixMs: '1',
        },
      },
    });
    expect(pod).toMatchObject({
      value: { event: { value: { phase: 'blocked_by_pdb', pdb: 'web-pdb' } } },
    });
    const [done] = toGatewayEvents('j', {
      event: {
        $case: 'result',
        value: {
          jobId: 'j',
          outcome: NodeJobOutcome.NODE_JOB_OUTCOME_TIMED_OUT,
          message: 'm',
          cordoned: true,
          pending: ['ns/p'],
          evictedCount: 1,
          skippedCount: 2,
          refusedCount: 0,
        },
      },
    });
    expect(done).toMatchObject({
      value: { event: { value: { outcome: 'timed_out', pending: ['ns/p'] } } },
    });
  });
});
