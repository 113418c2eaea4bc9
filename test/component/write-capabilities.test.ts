// node_jobs and mutations in the handshake come from the executor's own answer: a real executor
// server on a real Unix socket says which gates are on (GetCapabilities), and the wired collector
// (createCollector) advertises exactly those to a real gRPC gateway.
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
import { captureLogs } from '../helpers/gateway-harness.js';
import { createCollector } from '../../collector/collector.js';
import { askExecutorWriteFeatures } from '../../collector/executor-client/executor-features.js';

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
