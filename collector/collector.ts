// The collector's wiring: builds the buffer, the gateway stream, the sources and the health
// server from the loaded config and returns them as Services in start order. No process access
// and no logic of its own beyond mapping config keys and readiness rules; collector/main.ts
// owns argv, env, signals and the exit code.
import {
  createConsoleRelayThread,
  type ConsoleRelayThread,
  type ConsoleRelayThreadDeps,
} from './consoles/console-relay-thread.js';
import { join } from 'node:path';
import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { systemClock, type Clock } from '../shared/clock.js';
import type { Config } from '../shared/config/schema.js';
import { getErrorMessage } from '../shared/errors.js';
import type { Service } from '../shared/lifecycle/service.js';
import { AGENT_VERSION } from '../shared/version.js';
import { createHeapWatch } from './runtime/heap-watch.js';
import { createIdleGc } from './runtime/idle-gc.js';
import { DurableBuffer } from './buffer/durable-buffer.js';
import {
  GatewayStream,
  type GatewayStreamOptions,
  type StreamStatus,
} from './gateway/gateway-stream.js';
import type { DialOptions } from './gateway/dial.js';
import type { AgentIdentity } from './gateway/handshake.js';
import {
  createHealthServer,
  type ComponentHealth,
  type HealthServer,
  type ReadinessCheck,
} from './health/health-server.js';
import { parseListenAddress } from './health/listen-address.js';
import { queueHealth } from './health/queue-health.js';
import {
  createCollectorMetrics,
  registerPodLogMetrics,
  type CollectorMetrics,
  type ConnectionState,
} from './metrics.js';
import { DEFAULT_INGEST_LIMITS, type IngestLimits } from './sources/pod-logs/container-log.js';
import { applyIngestRules } from './sources/pod-logs/ingest-rules.js';
import { kubePodLogAccess } from './sources/pod-logs/kube-access.js';
import { createPodLogSource, type PodLogSource } from './sources/pod-logs/pod-log-source.js';
import { createLiveQuery } from './query/query-service.js';
import { createCapabilityCatalog } from './catalog/capability-catalog.js';
import type { ExecutorWriteFeatures } from './executor-client/executor-features.js';
import type { NodeJobHandler } from './gateway/session.js';
import { createNodeJobRouter, noExecutorHandler } from './executor-client/node-job-router.js';
import { createExecutorClient, type ExecutorClient } from './executor-client/executor-client.js';
import type { Source } from './sources/source.js';
import { wireMetricsSource } from './sources/metrics/wiring.js';
import { createStateSource, type StateSource } from './sources/state/state-source.js';
import { registerStateMetrics } from './sources/state/state-metrics.js';
import { demandRefs } from './sources/state/demand.js';
import { createEventsSource, type EventsSource } from './sources/events/events-source.js';
import { PayloadOptIn } from './sources/events/opt-in.js';
import { kubeHttpFor } from './watch/kube-http.js';
import { kubeListWatch } from './watch/kube-list-watch.js';
import { WatchHub } from './watch/shared-watch.js';

/** /readyz stays ok this long after the gateway stream stopped being ready (or since start). */
export const GATEWAY_READY_GRACE_MS = 30_000;
const CHECK_TIMEOUT_MS = 2000;
/** The spill file inside buffer.spill_dir. */
export const BUFFER_FILE = 'buffer.db';

/** Who this collector is, resolved by main.ts before wiring. */
export interface CollectorIdentity {
  /** UID of the kube-system namespace. */
  readonly clusterId: string;
  readonly agentId: string;
}

/** The one Kubernetes call the wiring itself makes: the readiness probe of API access. */
export interface ClusterProbe {
  /** Lists namespaces with limit 1; rejects when the API server does not answer us. */
  listOneNamespace(): Promise<void>;
}

export interface CollectorDeps {
  readonly logger: Logger;
  /** Client configuration for the sources (in-cluster, or a kubeconfig). */
  readonly kube: KubeConfig;
  /** Defaults to a probe built from `kube`. */
  readonly cluster?: ClusterProbe;
  readonly clock?: Clock;
  /**
   * The stream's liveness timers (keepalive pings, stall timeout), for tests that need a dead
   * gateway found in seconds. Not config keys: the defaults suit every gateway we know.
   */
  /** The executor's Unix socket (KUBEXA_EXECUTOR_SOCKET), when the chart deployed one. */
  readonly executorSocket?: string | undefined;
  /** The capability catalog's discovery interval; tests shorten it. */
  readonly catalogIntervalMs?: number;
  /**
   * A full garbage collection (main.ts exposes V8's): run when the process falls idle after its
   * heap grew (collector/runtime/idle-gc.ts). Absent: V8 collects on its own schedule only.
   */
  readonly collectGarbage?: () => void;
  /** How often the state source asks discovery again (CRDs that came or went); tests shorten it. */
  readonly stateDiscoveryIntervalMs?: number;
  /**
   * Node jobs and mutations the executor's gates allow (main.ts asks it at start): advertised as
   * node_jobs / mutations. Requests are relayed to `executorSocket` whatever these say (the
   * executor refuses, with an audit record); without an executor they are answered
   * EXECUTOR_UNAVAILABLE.
   */
  readonly writeFeatures?: ExecutorWriteFeatures;
  /**
   * Pod consoles, relayed to the executor on this socket: set only when the executor said it has
   * exec.pod on (main.ts asks it at start). Absent: not advertised, requests ignored.
   */
  readonly consoles?: {
    readonly executorSocket: string;
    /** exec.pod is on in the executor (absent: true, the relay exists for pod consoles). */
    readonly podConsoles?: boolean;
    /** exec.node is on in the executor: node consoles are advertised too. */
    readonly nodeConsoles?: boolean;
  };
  readonly streamTuning?: Pick<
    GatewayStreamOptions,
    'keepaliveTimeMs' | 'keepaliveTimeoutMs' | 'stallTimeoutMs'
  >;
}

export interface Collector {
  /** In start order; startServices() closes them in reverse. */
  readonly services: readonly Service[];
  readonly stream: GatewayStream;
  readonly buffer: DurableBuffer;
  readonly health: HealthServer;
  readonly metrics: CollectorMetrics;
  /** Rejects with a GatewayFatalError when the stream stops for good. */
  readonly done: Promise<void>;
}

/** Neither call below has a deadline of its own (/readyz bounds its checks). */
const NO_DEADLINE = new AbortController().signal;

/**
 * The probe the readiness check uses, on the collector's own credentials: one TLS agent for every
 * probe (the session resumed), where a typed client built a new agent and a full TLS handshake
 * for each of the kubelet's probes.
 */
export function createClusterProbe(kube: KubeConfig): ClusterProbe {
  const http = kubeHttpFor(kube);
  return {
    async listOneNamespace() {
      await http.getJson({ path: '/api/v1/namespaces', query: { limit: '1' } }, NO_DEADLINE);
    },
  };
}

/** Reads the kube-system namespace's UID, the cluster id every gateway session reports. */
export async function readClusterId(kube: KubeConfig): Promise<string> {
  const namespace = (await kubeHttpFor(kube).getJson(
    { path: '/api/v1/namespaces/kube-system' },
    NO_DEADLINE,
  )) as { metadata?: { uid?: string } };
  const uid = namespace.metadata?.uid;
  if (uid === undefined || uid === '') throw new Error('the kube-system namespace has no uid');
  return uid;
}

/** The buffer's file and caps, from the buffer.* keys. */
export interface BufferPlacement {
  readonly path: string;
  readonly maxMemoryBytes: number;
  readonly maxDiskBytes: number;
}

/** pod_consoles / node_consoles: what the executor said it has on (main.ts asked it). */
function consoleCapabilities(consoles: CollectorDeps['consoles']): {
  podConsoles: boolean;
  nodeConsoles: boolean;
} {
  if (consoles === undefined) return { podConsoles: false, nodeConsoles: false };
  return {
    podConsoles: consoles.podConsoles !== false,
    nodeConsoles: consoles.nodeConsoles === true,
  };
}

/**
 * Where the buffer's second tier lives: a file in buffer.spill_dir, or, with spill_dir empty,
 * an in-memory SQLite database. Then nothing survives a restart, max_disk_bytes does not
 * apply, and max_memory_bytes bounds both tiers together (half each), so "memory only" never
 * holds more than max_memory_bytes.
 */
export function bufferPlacement(buffer: Config['buffer']): BufferPlacement {
  if (buffer.spill_dir !== '') {
    return {
      path: join(buffer.spill_dir, BUFFER_FILE),
      maxMemoryBytes: buffer.max_memory_bytes,
      maxDiskBytes: buffer.max_disk_bytes,
    };
  }
  const half = Math.max(1, Math.floor(buffer.max_memory_bytes / 2));
  return { path: ':memory:', maxMemoryBytes: half, maxDiskBytes: half };
}

export function createCollector(
  config: Config,
  identity: CollectorIdentity,
  deps: CollectorDeps,
): Collector {
  const logger = deps.logger;
  const clock = deps.clock ?? systemClock;
  // The gauges read the buffer and the stream at scrape time, after both exist.
  const metrics = createCollectorMetrics(
    {
      bufferStats: () => buffer.stats(),
      connectionState: () => connectionState(stream.status()),
      lastHeartbeatAt: () => stream.status().lastHeartbeatAt,
      now: () => clock.now(),
      streamCounters: () => stream.status().counters,
    },
    { version: AGENT_VERSION, clusterId: identity.clusterId, agentId: identity.agentId },
  );
  const placement = bufferPlacement(config.buffer);
  const buffer = new DurableBuffer(placement, {
    logger,
    counters: {
      spilled: (n) => {
        metrics.spilled.inc(n);
      },
      replayed: (n) => {
        metrics.replayed.inc(n);
      },
      dropped: (reason, n) => {
        metrics.recordDrop(reason, n);
      },
      salvaged: (recovered, lost) => {
        metrics.salvaged.inc({ outcome: 'recovered' }, recovered);
        metrics.salvaged.inc({ outcome: 'lost' }, lost);
      },
    },
  });
  const capacityBytes = placement.maxMemoryBytes + placement.maxDiskBytes;
  const { gateway, collect } = config;
  let ingestLimits: IngestLimits = DEFAULT_INGEST_LIMITS;

  // Every data source, in start order; each writes into the buffer through the Sink contract.
  const sources: Source[] = [];
  // One list/watch per resource + namespace + selectors for logs, state and events (a pods
  // state rule, the lifecycle deriver and the log source share the pods').
  const watchHttp = kubeHttpFor(deps.kube);
  const watches = new WatchHub({
    clock,
    logger: logger.child({ component: 'watch' }),
    listWatch: (target) => kubeListWatch(watchHttp, target, (object) => object),
  });
  let podLogs: PodLogSource | undefined;
  const podLogCounters = registerPodLogMetrics(metrics.registry, () => podLogs);
  if (collect.logs.enabled) {
    podLogs = createPodLogSource(
      { logs: collect.logs, identity, ingest: ingestLimits },
      {
        logger,
        clock,
        sink: buffer,
        // The checkpoints advance only over batches the buffer has made durable or settled.
        releases: buffer,
        kube: kubePodLogAccess(deps.kube, watches, logger),
        counters: podLogCounters,
      },
    );
    sources.push(podLogs);
  }
  const metricsSource = collect.metrics.enabled
    ? wireMetricsSource(collect.metrics, identity, {
        logger,
        clock,
        kube: deps.kube,
        sink: buffer,
        registry: metrics.registry,
      })
    : undefined;
  if (metricsSource !== undefined) sources.push(metricsSource);
  const { state, events } = createWatchSources(config, identity, deps, {
    watches,
    logger,
    clock,
    sink: buffer,
    registry: metrics.registry,
  });
  sources.push(...[state, events].filter((source) => source !== undefined));
  // Live queries: answered beside the stream, never in its way (session.ts runs each on its own).
  const liveQuery = createLiveQuery(config.query, {
    kube: deps.kube,
    logger,
    registry: metrics.registry,
    secretsMetadataOnly: config.security.profile === 'strict',
  });
  const executor = executorClientFor(deps.executorSocket);
  const catalog = createCatalog(identity, deps, {
    enabled: collect.state.enabled,
    liveQuery,
    executor,
    sink: buffer,
    logger,
    clock,
  });
  const gatewayDial: DialOptions = {
    address: gateway.address,
    tls: gateway.tls,
    ...(gateway.ca_cert_path === '' ? {} : { caCertPath: gateway.ca_cert_path }),
    insecureSkipVerify: gateway.insecure_skip_verify,
    dialTimeoutMs: gateway.dial_timeout,
  };
  const consoleRelay = consoleRelayFor(deps.consoles, {
    dial: gatewayDial,
    logLevel: config.log.level,
    logger,
    // Audit records are durable items the overflow policy never drops.
    enqueue: (item) => {
      buffer.enqueue(item);
    },
  });

  const writes = nodeJobWiring(deps, logger, buffer);

  // Which new payload kinds this session's gateway accepted (handshake field or watcher ids).
  const optIn = new PayloadOptIn();
  const stream = new GatewayStream(
    {
      ...gatewayDial,
      handshakeTimeoutMs: gateway.handshake_timeout,
      reconnectInitialDelayMs: gateway.reconnect_initial_delay,
      reconnectMaxDelayMs: gateway.reconnect_max_delay,
      batchSize: config.buffer.batch_size,
      flushIntervalMs: config.buffer.flush_interval,
      bufferCapacityBytes: capacityBytes,
      identity: {
        tenantToken: config.agent.tenant_token,
        agentVersion: AGENT_VERSION,
        clusterId: identity.clusterId,
        agentId: identity.agentId,
        capabilities: {
          ...advertisedCapabilities({
            logs: podLogs !== undefined,
            metrics: metricsSource !== undefined,
            profiles: metricsSource !== undefined && collect.metrics.profiles.enabled,
            state: state !== undefined,
            podLifecycleEvents: events !== undefined && collect.events.pod_lifecycle,
            kubeEvents: events !== undefined && collect.events.kubernetes_events,
          }),
          query: true,
          catalog: catalog !== undefined,
          ...consoleCapabilities(deps.consoles),
          ...writes.capabilities,
        },
      },
      ...deps.streamTuning,
    },
    {
      logger,
      buffer,
      clock,
      // Cumulative, as the Go agent reports them; the same counts /metrics shows.
      sourceCounters: () => podLogCounters.ingestTotals(),
      quarantinedItems: () => buffer.stats().quarantined,
      // Whether the cluster serves metrics.k8s.io now (caps.metrics only says we can send them).
      metricsApi: () => {
        const state = metricsSource?.kubeMetricsAvailability();
        return state === 'available' || state === 'unavailable' ? state : '';
      },
      // The stream applies heartbeat, batch and flush settings itself; the rest goes to sources.
      ...(consoleRelay === undefined ? {} : { consoleHandler: consoleRelay.handle }),
      nodeJobHandler: writes.handler,
      onConfigUpdate: (update) => {
        // Demand watchers: only an update that carries watchers reconciles them.
        const demand = demandRefs(update);
        if (state !== undefined && demand !== undefined) state.reconcileDemand(demand);
        events?.setDelivery(optIn.onWatchers(update.config?.watchers ?? []));
        if (podLogs === undefined || update.config?.ingestRules === undefined) return;
        ingestLimits = applyIngestRules(ingestLimits, update.config.ingestRules);
        podLogs.setIngestLimits(ingestLimits);
      },
      onHandshake: ({ acceptedPayloads }) => {
        events?.setDelivery(optIn.onHandshake(acceptedPayloads));
      },
      queryHandler: liveQuery.handler,
    },
  );

  const lifecycle = lifecycleService();
  const cluster = deps.cluster ?? createClusterProbe(deps.kube);
  const checks: ReadinessCheck[] = [
    lifecycle.check,
    { name: 'gateway', check: () => gatewayHealth(stream.status(), clock.now()) },
    { name: 'queue', check: () => queueHealth(buffer, capacityBytes, clock.now()) },
    {
      name: 'kubernetes',
      check: async () => {
        await cluster.listOneNamespace();
        return { state: 'ok' };
      },
    },
    ...sources.map((source) => ({
      name: `source:${source.name}`,
      check: (): ComponentHealth =>
        source.health?.() ??
        (source.up() ? { state: 'ok' } : { state: 'unhealthy', reason: 'not up' }),
    })),
  ];
  const health = createHealthServer(
    {
      health: parseListenAddress(config.observability.health_addr, 'observability.health_addr'),
      metrics: parseListenAddress(config.observability.metrics_addr, 'observability.metrics_addr'),
      checkTimeoutMs: CHECK_TIMEOUT_MS,
    },
    { logger, registry: metrics.registry, checks, now: () => clock.now() },
  );
  const bufferService: Service = {
    name: 'buffer',
    start: () => Promise.resolve(),
    // After the stream has closed (its in-flight items are back in the buffer): writes every
    // item held only in memory to disk.
    close: () => buffer.close(),
  };
  // Closed in reverse: readiness turns false, sources stop, the stream half-closes and returns
  // its in-flight items, the buffer flushes to disk, and the health server goes last.
  const services: Service[] = [
    health,
    bufferService,
    // Near the heap limit, the buffer's memory tier moves to disk (collector/runtime/heap-watch.ts).
    createHeapWatch(
      {},
      {
        logger,
        clock,
        shed: (pressure) => buffer.shedMemory(pressure),
      },
    ),
    // After a burst (a first list of thousands of objects, a rollout), the garbage it left.
    ...idleGc(deps.collectGarbage, logger, clock),
    liveQuery.service,
    // Closed after the stream (no console request comes any more): its consoles' calls end.
    ...(consoleRelay === undefined ? [] : [consoleRelay.service]),
    stream,
    // Closed before the stream: running jobs are cancelled and their audit records buffered.
    ...writes.services,
    ...sources,
    // Closed after the catalog, the one thing that calls it.
    {
      name: 'executor-client',
      start: () => Promise.resolve(),
      close: () => {
        executor?.close();
        return Promise.resolve();
      },
    },
    ...[catalog].filter((service) => service !== undefined),
    lifecycle.service,
  ];
  return { services, stream, buffer, health, metrics, done: stream.done };
}

/**
 * The console relay's thread when the executor offers consoles (collector.consoles), else none;
 * the first console starts it.
 */
function consoleRelayFor(
  consoles: CollectorDeps['consoles'],
  deps: Omit<ConsoleRelayThreadDeps, 'socketPath'>,
): ConsoleRelayThread | undefined {
  if (consoles === undefined) return undefined;
  // On a thread of its own: the log pipeline's GC pauses do not hold keystrokes (its header).
  return createConsoleRelayThread({ ...deps, socketPath: consoles.executorSocket });
}

/**
 * What the handshake's AgentCapabilities advertise: a payload kind only when this process
 * produces it. A gateway routes config and expectations by these flags, so advertising a kind
 * nothing produces (a collector the config disabled) would promise data that never comes.
 */
export function advertisedCapabilities(running: {
  readonly logs: boolean;
  readonly metrics?: boolean;
  readonly profiles?: boolean;
  readonly state?: boolean;
  readonly podLifecycleEvents?: boolean;
  readonly kubeEvents?: boolean;
}): AgentIdentity['capabilities'] {
  return {
    logs: running.logs,
    state: running.state === true,
    metrics: running.metrics === true,
    profiles: running.profiles === true,
    podLifecycleEvents: running.podLifecycleEvents === true,
    kubeEvents: running.kubeEvents === true,
  };
}

/**
 * Node jobs and mutations: relayed to the executor when the chart deployed one (it decides),
 * advertised only when its gates are on, answered EXECUTOR_UNAVAILABLE without one.
 */
function nodeJobWiring(
  deps: CollectorDeps,
  logger: Logger,
  buffer: DurableBuffer,
): {
  readonly capabilities: { readonly nodeJobs: boolean; readonly mutations: boolean };
  readonly handler: NodeJobHandler;
  readonly services: readonly Service[];
} {
  const socketPath = deps.executorSocket;
  if (socketPath === undefined || socketPath === '') {
    return {
      capabilities: { nodeJobs: false, mutations: false },
      handler: noExecutorHandler,
      services: [],
    };
  }
  const router = createNodeJobRouter({
    socketPath,
    logger,
    // Audit records are durable items the overflow policy never drops.
    enqueue: (item) => {
      buffer.enqueue(item);
    },
  });
  return {
    capabilities: {
      nodeJobs: deps.writeFeatures?.nodeJobs === true,
      mutations: deps.writeFeatures?.mutations === true,
    },
    handler: router.handle,
    services: [router.service],
  };
}

/** A client of the executor's socket, when the chart deployed an executor. */
function executorClientFor(socketPath: string | undefined): ExecutorClient | undefined {
  return socketPath === undefined || socketPath === ''
    ? undefined
    : createExecutorClient(socketPath);
}

/**
 * The capability catalog, with the executor's side when the chart deployed an executor. It runs
 * with cluster state collection, as the Go agent's does (reference section 8): an owner who turned
 * state off asked for no cluster-wide discovery and no hourly sweep of access reviews.
 */
function createCatalog(
  identity: CollectorIdentity,
  deps: CollectorDeps,
  context: {
    enabled: boolean;
    liveQuery: ReturnType<typeof createLiveQuery>;
    sink: DurableBuffer;
    logger: Logger;
    clock: Clock;
    executor: ExecutorClient | undefined;
  },
): ReturnType<typeof createCapabilityCatalog> | undefined {
  const { enabled, liveQuery, sink, logger, clock, executor } = context;
  if (!enabled) return undefined;
  return createCapabilityCatalog(
    {
      clusterId: identity.clusterId,
      agentId: identity.agentId,
      ...(deps.catalogIntervalMs === undefined ? {} : { intervalMs: deps.catalogIntervalMs }),
    },
    {
      rest: liveQuery.rest,
      policy: liveQuery.policy,
      sink,
      logger,
      clock,
      ...(executor === undefined ? {} : { executor }),
    },
  );
}

/** The idle collection service when main.ts exposed V8's gc (collector/runtime/idle-gc.ts). */
function idleGc(collect: (() => void) | undefined, logger: Logger, clock: Clock): Service[] {
  return collect === undefined ? [] : [createIdleGc({}, { logger, clock, collect })];
}

/** Cluster state and Kubernetes/pod lifecycle events, both on the shared watch layer. */
function createWatchSources(
  config: Config,
  identity: CollectorIdentity,
  deps: CollectorDeps,
  context: {
    logger: Logger;
    clock: Clock;
    sink: DurableBuffer;
    registry: Registry;
    watches: WatchHub;
  },
): { state?: StateSource; events?: EventsSource } {
  const { logger, clock, sink, watches } = context;
  const collect = config.collect;
  // Cluster state (collect.state) on the shared watch layer.
  let state: StateSource | undefined;
  const stateCounters = registerStateMetrics(context.registry, () => state);
  if (collect.state.enabled) {
    state = createStateSource(
      {
        state: collect.state,
        identity,
        secretsMetadataOnly: config.security.profile === 'strict',
        ...(deps.stateDiscoveryIntervalMs === undefined
          ? {}
          : { discoveryIntervalMs: deps.stateDiscoveryIntervalMs }),
      },
      { logger, clock, sink, http: kubeHttpFor(deps.kube), counters: stateCounters, watches },
    );
  }
  // Kubernetes events and pod lifecycle events (collect.events), sent once the gateway opts in.
  let events: EventsSource | undefined;
  if (
    collect.events.enabled &&
    (collect.events.pod_lifecycle || collect.events.kubernetes_events)
  ) {
    events = createEventsSource(
      { events: collect.events, identity },
      { logger, clock, sink, http: kubeHttpFor(deps.kube), watches },
    );
  }
  return {
    ...(state === undefined ? {} : { state }),
    ...(events === undefined ? {} : { events }),
  };
}

/** The last service started and the first closed: /readyz says "shutting down" from then on. */
function lifecycleService(): { service: Service; check: ReadinessCheck } {
  let phase: 'starting' | 'running' | 'stopping' = 'starting';
  return {
    service: {
      name: 'readiness',
      start: () => {
        if (phase === 'starting') phase = 'running';
        return Promise.resolve();
      },
      close: () => {
        phase = 'stopping';
        return Promise.resolve();
      },
    },
    check: {
      name: 'lifecycle',
      check: () =>
        phase === 'running'
          ? { state: 'ok' }
          : { state: 'unhealthy', reason: phase === 'starting' ? 'starting' : 'shutting down' },
    },
  };
}

export function connectionState(status: StreamStatus): ConnectionState {
  switch (status.state) {
    case 'ready':
      return 'connected';
    case 'backoff':
      return 'backoff';
    case 'stopped':
      return 'stopped';
    case 'idle':
    case 'connecting':
    case 'handshaking':
      return 'connecting';
  }
}

/** A ready session waiting this long without progress is named in /readyz, before it ends. */
export const GATEWAY_STALL_REPORT_MS = 5000;

/**
 * Ready, or not ready for less than the grace period (a reconnect in progress). A ready session
 * that has waited for the gateway without progress is still ok (it ends itself at the stall
 * timeout, then the grace applies), but the reason says so.
 */
export function gatewayHealth(status: StreamStatus, now: number): ComponentHealth {
  if (status.state === 'ready') {
    if (status.stalledForMs < GATEWAY_STALL_REPORT_MS) return { state: 'ok' };
    const waited = Math.round(status.stalledForMs / 1000);
    const limit = Math.round(status.stallTimeoutMs / 1000);
    return {
      state: 'ok',
      reason: `connected, but no progress from the gateway for ${waited} s; the session ends at ${limit} s`,
    };
  }
  if (status.state === 'stopped') return { state: 'unhealthy', reason: 'gateway stream stopped' };
  const since = status.notReadySince ?? now;
  const seconds = Math.round((now - since) / 1000);
  const failures = status.consecutiveFailures;
  const reason = `not connected for ${seconds} s (${status.state}, ${failures} consecutive failures)`;
  return now - since > GATEWAY_READY_GRACE_MS
    ? { state: 'unhealthy', reason }
    : { state: 'ok', reason: `${reason}; within the ${GATEWAY_READY_GRACE_MS / 1000} s grace` };
}

/** For log lines: the error text of a failed Kubernetes call, without the request. */
export function describeKubeError(err: unknown): string {
  return getErrorMessage(err).split('\n')[0] ?? 'unknown error';
}
