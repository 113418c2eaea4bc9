// node_jobs, mutations, pod_consoles and node_consoles in the handshake come from the executor's
// own answer: a real executor server on a real Unix socket says which gates are on
// (GetCapabilities), and the wired collector (createCollector) advertises exactly those to a real
// gRPC gateway. A gateway is never sent (and the demo gateway never sends) a console of a kind
// the agent did not advertise.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Server, ServerCredentials, type ServerDuplexStream } from '@grpc/grpc-js';
import { KubeConfig } from '@kubernetes/client-node';
import { afterEach, describe, expect, it } from 'vitest';
import { createCommandGuard } from '../../executor/guard/authorize-command.js';
import { createCommandVerifier } from '../../executor/guard/verify-command.js';
import { createExecutorServer } from '../../executor/server/executor-server.js';
import {
  AgentServiceService,
  Gate,
  type AgentCapabilities,
  type AgentMessage,
  type GatewayMessage,
} from '../../proto/index.js';
import { systemClock } from '../../shared/clock.js';
import { loadConfig } from '../../shared/config/load-config.js';
import { captureLogs, startHarness, until } from '../helpers/gateway-harness.js';
import { createCollector } from '../../collector/collector.js';
import {
  askExecutorConsoleFeatures,
  askExecutorWriteFeatures,
  type ExecutorConsoleFeatures,
} from '../../collector/executor-client/executor-features.js';
import type { ConsoleHandler } from '../../collector/gateway/session.js';

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** An executor server whose config turned `gates` on. */
async function executorWith(gates: Gate[]): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'kubexa-writecaps-'));
  const socketPath = join(dir, 'executor', 'executor.sock');
  const server = createExecutorServer(
    {
      socketPath,
      ownUid: process.getuid?.() ?? -1,
      enabledGates: gates,
      guard: createCommandGuard(
        createCommandVerifier({ keys: new Map(), clock: systemClock }),
        new Set(),
      ),
      shutdownTimeoutMs: 1000,
    },
    { logger: captureLogs().logger },
  );
  await server.start(new AbortController().signal);
  cleanups.push(
    () => server.close(),
    () => rm(dir, { recursive: true, force: true }),
  );
  return socketPath;
}

/** The capabilities the wired collector sends in its handshake. */
async function handshakeCaps(deps: {
  executorSocket?: string;
  writeFeatures?: { nodeJobs: boolean; mutations: boolean };
  consoles?: ExecutorConsoleFeatures;
}): Promise<AgentCapabilities | undefined> {
  let resolve!: (caps: AgentCapabilities | undefined) => void;
  const handshake = new Promise<AgentCapabilities | undefined>((r) => (resolve = r));
  const server = new Server();
  server.addService(AgentServiceService, {
    connect: (call: ServerDuplexStream<AgentMessage, GatewayMessage>) => {
      call.once('data', (message: AgentMessage) => {
        if (message.payload?.$case === 'handshake') resolve(message.payload.value.caps);
      });
      call.on('error', () => undefined);
    },
  });
  const port = await new Promise<number>((res, rej) => {
    server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (err, p) => {
      if (err) rej(err);
      else res(p);
    });
  });
  cleanups.push(() => {
    server.forceShutdown();
  });
  const kube = new KubeConfig();
  kube.loadFromOptions({
    clusters: [{ name: 'c', server: 'https://127.0.0.1:1', skipTLSVerify: true }],
    users: [{ name: 'u', token: 'unused' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  const { config } = loadConfig({
    fileText: [
      'gateway:',
      `  address: 127.0.0.1:${String(port)}`,
      '  tls: false',
      'observability:',
      '  health_addr: "127.0.0.1:0"',
      '  metrics_addr: "127.0.0.1:0"',
      '',
    ].join('\n'),
    env: { KUBEXA_TENANT_TOKEN: 'token-for-test' },
  });
  const collector = createCollector(
    config,
    { clusterId: 'cluster-uid', agentId: 'agent-id' },
    { logger: captureLogs().logger, kube, ...deps },
  );
  cleanups.push(
    () => collector.stream.close(),
    () => collector.buffer.close(),
  );
  await collector.stream.start(new AbortController().signal);
  return handshake;
}

describe('node_jobs and mutations advertised from the executor', () => {
  it("reads the executor's gates: node ops alone, both, none", async () => {
    const logs = captureLogs();
    const nodeOps = await executorWith([Gate.GATE_POD_EXEC, Gate.GATE_NODE_OPS]);
    expect(await askExecutorWriteFeatures(nodeOps, logs.logger)).toEqual({
      nodeJobs: true,
      mutations: false,
    });
    const both = await executorWith([Gate.GATE_NODE_OPS, Gate.GATE_MUTATE]);
    expect(await askExecutorWriteFeatures(both, logs.logger)).toEqual({
      nodeJobs: true,
      mutations: true,
    });
    const none = await executorWith([Gate.GATE_POD_EXEC]);
    expect(await askExecutorWriteFeatures(none, logs.logger)).toEqual({
      nodeJobs: false,
      mutations: false,
    });
  });

  it('advertises nothing when the executor does not answer, and says why', async () => {
    const logs = captureLogs();
    expect(await askExecutorWriteFeatures('/nonexistent/executor.sock', logs.logger, 2000)).toEqual(
      { nodeJobs: false, mutations: false },
    );
    expect(logs.lines.map((l) => l.msg)).toContain(
      'the executor did not answer at start: node jobs and mutations are not advertised',
    );
  });

  it('puts what the executor said in the handshake, and nothing without an executor', async () => {
    const socket = await executorWith([Gate.GATE_NODE_OPS]);
    const features = await askExecutorWriteFeatures(socket, captureLogs().logger);
    const caps = await handshakeCaps({ executorSocket: socket, writeFeatures: features });
    expect(caps).toMatchObject({ nodeJobs: true, mutations: false });
    // Features claimed without an executor socket are not advertised: nothing could serve them.
    const without = await handshakeCaps({ writeFeatures: { nodeJobs: true, mutations: true } });
    expect(without).toMatchObject({ nodeJobs: false, mutations: false });
  });
});

describe('pod_consoles and node_consoles advertised from the executor', () => {
  it("reads the executor's gates: pod exec, node shell, both, neither, no answer", async () => {
    const logs = captureLogs();
    const pod = await executorWith([Gate.GATE_POD_EXEC, Gate.GATE_NODE_OPS]);
    expect(await askExecutorConsoleFeatures(pod, logs.logger)).toEqual({
      executorSocket: pod,
      podConsoles: true,
      nodeConsoles: false,
    });
    const node = await executorWith([Gate.GATE_NODE_SHELL]);
    expect(await askExecutorConsoleFeatures(node, logs.logger)).toEqual({
      executorSocket: node,
      podConsoles: false,
      nodeConsoles: true,
    });
    const both = await executorWith([Gate.GATE_POD_EXEC, Gate.GATE_NODE_SHELL]);
    expect(await askExecutorConsoleFeatures(both, logs.logger)).toMatchObject({
      podConsoles: true,
      nodeConsoles: true,
    });
    // Write gates on, console gates off: no relay at all.
    const writesOnly = await executorWith([Gate.GATE_NODE_OPS, Gate.GATE_MUTATE]);
    expect(await askExecutorConsoleFeatures(writesOnly, logs.logger)).toBeUndefined();
    expect(
      await askExecutorConsoleFeatures('/nonexistent/executor.sock', logs.logger, 2000),
    ).toBeUndefined();
    expect(logs.lines.map((l) => l.msg)).toContain(
      'the executor did not answer at start: pod consoles are not advertised',
    );
  });

  it('puts what the executor said in the handshake, and no console without it', async () => {
    const pod = await executorWith([Gate.GATE_POD_EXEC]);
    const consoles = await askExecutorConsoleFeatures(pod, captureLogs().logger);
    expect(
      await handshakeCaps({ executorSocket: pod, ...(consoles === undefined ? {} : { consoles }) }),
    ).toMatchObject({ podConsoles: true, nodeConsoles: false });
    const writesOnly = await executorWith([Gate.GATE_NODE_OPS]);
    const none = await askExecutorConsoleFeatures(writesOnly, captureLogs().logger);
    expect(
      await handshakeCaps({
        executorSocket: writesOnly,
        ...(none === undefined ? {} : { consoles: none }),
      }),
    ).toMatchObject({ podConsoles: false, nodeConsoles: false });
  });

  /** A collector stream advertising `caps` to a real demo gateway; the agent's console requests. */
  async function consoleHarness(caps: { podConsoles: boolean; nodeConsoles: boolean }) {
    const received: string[] = [];
    const consoleHandler: ConsoleHandler = (request) => {
      received.push(request.$case === 'consoleOpen' ? `open:${request.value.node}` : 'attach');
    };
    const harness = await startHarness({
      stream: {
        identity: {
          tenantToken: 'tenant-secret-0123456789',
          agentVersion: '0.1.0-test',
          clusterId: '6f1c2a4e-0000-4000-8000-000000000001',
          agentId: 'agent-under-test',
          capabilities: { logs: true, state: true, metrics: false, ...caps },
        },
      },
      deps: { consoleHandler },
    });
    cleanups.push(async () => {
      await harness[Symbol.asyncDispose]();
    });
    const session = await harness.gateway.waitForSession();
    return { harness, session: session.sessionId, received };
  }

  const podSpec = { namespace: 'default', pod: 'web-0', command: ['true'], tty: false };

  it('the demo gateway never sends a console of a kind the agent did not advertise', async () => {
    const nodeOnly = await consoleHarness({ podConsoles: false, nodeConsoles: true });
    const pod = nodeOnly.harness.gateway.consoles.open(nodeOnly.session, podSpec);
    expect(pod.state).toBe('refused');
    expect(pod.refusal?.code).toBe('AGENT_UNAVAILABLE');
    // The node console it did advertise goes out on the same session.
    nodeOnly.harness.gateway.consoles.open(nodeOnly.session, { ...podSpec, node: 'worker-1' });
    await until(() => nodeOnly.received.length > 0, 'the node console open at the agent');
    expect(nodeOnly.received).toEqual(['open:worker-1']);

    const podOnly = await consoleHarness({ podConsoles: true, nodeConsoles: false });
    const node = podOnly.harness.gateway.consoles.open(podOnly.session, {
      ...podSpec,
      node: 'worker-1',
    });
    expect(node.state).toBe('refused');
    podOnly.harness.gateway.consoles.open(podOnly.session, podSpec);
    await until(() => podOnly.received.length > 0, 'the pod console open at the agent');
    expect(podOnly.received).toEqual(['open:']);

    const neither = await consoleHarness({ podConsoles: false, nodeConsoles: false });
    expect(neither.harness.gateway.consoles.open(neither.session, podSpec).state).toBe('refused');
    expect(
      neither.harness.gateway.consoles.open(neither.session, { ...podSpec, node: 'worker-1' })
        .state,
    ).toBe('refused');
    // Refused at the gateway, so nothing is on its way to the agent either.
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(neither.received).toEqual([]);
  });
});
