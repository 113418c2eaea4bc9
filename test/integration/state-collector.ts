// Test support: the collector as collector.ts wires it, in this process, against the harness
// cluster and an in-process demo gateway; every StateEvent the gateway stores, decoded.
import { pino } from 'pino';
import { createCollector, type Collector } from '../../collector/collector.js';
import { DemoGateway } from '../../demo-gateway/demo-gateway.js';
import { loadConfig } from '../../shared/config/load-config.js';
import { startServices } from '../../shared/lifecycle/service.js';
import {
  ConfigSnapshot,
  EventType,
  type AgentMessage,
  type StateEvent,
} from '../../proto/index.js';
import { loadKubeConfig } from '../helpers/kube.js';
import type { KubeConfig } from '@kubernetes/client-node';

const TOKEN = 'state-test-token-0123456789';

/** A StateEvent as tests read it. */
export interface SeenState {
  readonly type: 'ADDED' | 'MODIFIED' | 'DELETED' | 'UNSPECIFIED';
  readonly kind: number;
  readonly name: string;
  readonly namespace: string;
  readonly apiVersion: string;
  readonly resource: string;
  readonly labels: Record<string, string>;
  readonly object: Record<string, unknown>;
  readonly messageId: string;
}

const TYPES: Record<number, SeenState['type']> = {
  [EventType.EVENT_TYPE_ADDED]: 'ADDED',
  [EventType.EVENT_TYPE_MODIFIED]: 'MODIFIED',
  [EventType.EVENT_TYPE_DELETED]: 'DELETED',
};

export function decodeState(message: AgentMessage): SeenState | undefined {
  if (message.payload?.$case !== 'state') return undefined;
  const event: StateEvent = message.payload.value;
  return {
    type: TYPES[event.type] ?? 'UNSPECIFIED',
    kind: event.kind,
    name: event.name,
    namespace: event.namespace,
    apiVersion: event.apiVersion,
    resource: event.resource,
    labels: event.labels,
    object: JSON.parse(Buffer.from(event.object).toString('utf8')) as Record<string, unknown>,
    messageId: message.messageId,
  };
}

export interface RunningStateCollector extends AsyncDisposable {
  readonly gateway: DemoGateway;
  readonly collector: Collector;
  /** Every StateEvent the gateway stored (first deliveries only), in order. */
  readonly states: SeenState[];
  /** Every message stored, first deliveries only. */
  readonly messages: AgentMessage[];
  /** Every collector log line at trace level, as written. */
  readonly logs: { readonly raw: string[] };
  /** The gateway session id (after the handshake). */
  session(): Promise<string>;
  stop(): Promise<void>;
}

export async function startStateCollector(
  kubeconfigPath: string,
  configLines: readonly string[],
  options: {
    discoveryIntervalMs?: number;
    acceptedPayloads?: readonly string[];
    /** The gateway asks for heartbeats this often (the collector's default is 30 s). */
    heartbeatIntervalSec?: number;
    /** The API server as the collector reaches it (default: the kubeconfig file's). */
    kube?: KubeConfig;
    /**
     * The gateway of an earlier collector (`running.gateway`), kept across this collector's
     * start and stop (its store remembers every message id), listening already. Its options
     * stay as they were: `acceptedPayloads` and `heartbeatIntervalSec` are ignored then.
     */
    gateway?: DemoGateway;
    /** Leave the gateway this helper started open at stop (for the next collector to reuse). */
    keepGateway?: boolean;
  } = {},
): Promise<RunningStateCollector> {
  const ownGateway = options.gateway === undefined;
  const gateway =
    options.gateway ??
    new DemoGateway(
      {
        acceptToken: TOKEN,
        ...(options.heartbeatIntervalSec === undefined
          ? {}
          : {
              initialConfig: ConfigSnapshot.fromPartial({
                heartbeatIntervalSec: options.heartbeatIntervalSec,
              }),
            }),
        ...(options.acceptedPayloads === undefined
          ? {}
          : { acceptedPayloads: options.acceptedPayloads }),
      },
      { logger: pino({ level: 'silent' }) },
    );
  const port = ownGateway ? await gateway.listen('127.0.0.1', 0) : gateway.port;
  if (port === undefined) throw new Error('the given gateway is not listening');
  const states: SeenState[] = [];
  const messages: AgentMessage[] = [];
  gateway.events.on('message', (message, isNew) => {
    if (!isNew) return;
    messages.push(message);
    const state = decodeState(message);
    if (state !== undefined) states.push(state);
  });
  const fileText = [
    'gateway:',
    `  address: 127.0.0.1:${String(port)}`,
    '  tls: false',
    'observability:',
    '  health_addr: "127.0.0.1:0"',
    '  metrics_addr: "127.0.0.1:0"',
    'buffer:',
    '  flush_interval: 50ms',
    ...configLines,
    '',
  ].join('\n');
  const { config } = loadConfig({ fileText, env: { KUBEXA_TENANT_TOKEN: TOKEN } });
  // Every level, so "a Secret never appears in the logs" covers trace too.
  const raw: string[] = [];
  const logs = {
    raw,
    logger: pino({ level: 'trace' }, { write: (line: string) => raw.push(line) }),
  };
  const collector = createCollector(
    config,
    { clusterId: 'state-test-cluster', agentId: 'state-test-agent' },
    {
      logger: logs.logger,
      kube: options.kube ?? loadKubeConfig(kubeconfigPath),
      stateDiscoveryIntervalMs: options.discoveryIntervalMs ?? 1000,
    },
  );
  const stopSignal = new AbortController();
  const closeAll = await startServices(collector.services, stopSignal.signal);
  let stopped: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    stopped ??= (async () => {
      stopSignal.abort();
      await closeAll();
      if (ownGateway && options.keepGateway !== true) await gateway.close();
    })();
    return stopped;
  };
  return {
    gateway,
    collector,
    states,
    messages,
    logs,
    session: async () => (await gateway.waitForSession()).sessionId,
    stop,
    [Symbol.asyncDispose]: stop,
  };
}
