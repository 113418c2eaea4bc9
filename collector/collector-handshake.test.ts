// The handshake the wired collector sends (createCollector, from a real config), received by a
// real gRPC server on a real socket: what its AgentCapabilities advertise.
import { Server, ServerCredentials, type ServerDuplexStream } from '@grpc/grpc-js';
import { KubeConfig } from '@kubernetes/client-node';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../shared/config/load-config.js';
import {
  AgentServiceService,
  AgentCapabilities,
  type AgentMessage,
  type GatewayMessage,
} from '../proto/index.js';
import { captureLogs } from '../test/helpers/gateway-harness.js';
import { createCollector } from './collector.js';

/** Answers every handshake with an acceptance and hands over the agent's capabilities. */
async function recordingGateway(): Promise<{
  port: number;
  handshake: Promise<AgentCapabilities | undefined>;
  close: () => void;
}> {
  let resolve!: (caps: AgentCapabilities | undefined) => void;
  const handshake = new Promise<AgentCapabilities | undefined>((r) => (resolve = r));
  const server = new Server();
  server.addService(AgentServiceService, {
    connect: (call: ServerDuplexStream<AgentMessage, GatewayMessage>) => {
      call.once('data', (message: AgentMessage) => {
        if (message.payload?.$case !== 'handshake') return;
        resolve(message.payload.value.caps);
        call.write({
          messageId: 'h',
          payload: {
            $case: 'handshake',
            value: {
              accepted: true,
              sessionId: 's',
              serverVersion: 'test',
              rejectionReason: '',
              config: undefined,
              protoVersion: 'v1',
              supportedProtoVersions: ['v1'],
              deliveryAcks: true,
              acceptedPayloads: [],
            },
          },
        });
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
  return {
    port,
    handshake,
    close: () => {
      server.forceShutdown();
    },
  };
}

/** A client configuration nothing calls: no source is started in these tests. */
function unusedKube(): KubeConfig {
  const kube = new KubeConfig();
  kube.loadFromOptions({
    clusters: [{ name: 'c', server: 'https://127.0.0.1:1', skipTLSVerify: true }],
    users: [{ name: 'u', token: 'unused' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  return kube;
}

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function advertised(collect: string[]): Promise<{
  caps: AgentCapabilities | undefined;
  logs: ReturnType<typeof captureLogs>;
}> {
  const gateway = await recordingGateway();
  cleanups.push(gateway.close);
  const fileText = [
    'gateway:',
    `  address: 127.0.0.1:${String(gateway.port)}`,
    '  tls: false',
    'observability:',
    '  health_addr: "127.0.0.1:0"',
    '  metrics_addr: "127.0.0.1:0"',
    ...collect,
    '',
  ].join('\n');
  const { config } = loadConfig({ fileText, env: { KUBEXA_TENANT_TOKEN: 'token-for-test' } });
  const logs = captureLogs();
  const collector = createCollector(
    config,
    { clusterId: 'cluster-uid', agentId: 'agent-id' },
    { logger: logs.logger, kube: unusedKube() },
  );
  cleanups.push(
    () => collector.stream.close(),
    () => collector.buffer.close(),
  );
  await collector.stream.start(new AbortController().signal);
  return { caps: await gateway.handshake, logs };
}

describe('handshake capabilities', () => {
  it('advertises each collector while it runs, live query always, the catalog with state', async () => {
    const on = await advertised([]);
    // Live query is always on: a refusal is an answer too. The catalog runs with collect.state.
    expect(on.caps).toEqual(
      AgentCapabilities.fromPartial({
        logs: true,
        state: true,
        metrics: true,
        podLifecycleEvents: true,
        kubeEvents: true,
        query: true,
        catalog: true,
      }),
    );

    const off = await advertised([
      'collect:',
      '  logs: { enabled: false }',
      '  state: { enabled: false }',
      '  metrics: { enabled: false }',
      '  events: { enabled: true, pod_lifecycle: true, kubernetes_events: false }',
    ]);
    expect(off.caps).toEqual(
      AgentCapabilities.fromPartial({ podLifecycleEvents: true, query: true, catalog: false }),
    );
    expect(off.logs.lines.some((l) => l.msg.startsWith('collectors enabled in the config'))).toBe(
      false,
    );
  });
});
