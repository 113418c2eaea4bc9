// Every metric the collector exports, defined in one file on one registry per process, so an
// unused or duplicate metric is visible here. Names: kubexa_collector_<subject>_<unit>.
import { collectDefaultMetrics, Counter, Gauge, Registry } from 'prom-client';
import type { BufferStats, DropReason } from './buffer/types.js';
import type { SourceCounters } from './gateway/types.js';

/** Gateway connection states, exported as one gauge per state (1 for the current one). */
export const CONNECTION_STATES = ['connecting', 'connected', 'backoff', 'stopped'] as const;
export type ConnectionState = (typeof CONNECTION_STATES)[number];

/** Live values the gauges read at scrape time, so they can never go stale. */
export interface CollectorMetricSources {
  bufferStats(): BufferStats;
  connectionState(): ConnectionState;
  /** Unix milliseconds of the last heartbeat sent, or undefined before the first. */
  lastHeartbeatAt(): number | undefined;
  now(): number;
  /**
   * Cumulative gateway stream counters. When given, the reconnects, sent and acked counters
   * follow them at scrape time (the stream counts, the registry only reports).
   */
  streamCounters?(): StreamCounterValues;
}

export interface StreamCounterValues {
  readonly reconnects: number;
  /** Sessions ended by the stall deadline (no progress from the gateway). */
  readonly stalls: number;
  readonly sent: number;
  /** Settled items: acked by the gateway, or sent to a gateway without acks. */
  readonly settled: number;
}

/** A counter's collect() that adds what a cumulative source gained since the last scrape. */
function follow(read: (() => number) | undefined): (this: Counter) => void {
  let seen = 0;
  return function collect(this: Counter) {
    if (read === undefined) return;
    const value = read();
    if (value > seen) this.inc(value - seen);
    seen = Math.max(seen, value);
  };
}

export interface CollectorMetrics {
  readonly registry: Registry;
  readonly spilled: Counter;
  readonly replayed: Counter;
  readonly dropped: Counter<'reason'>;
  /** Rows of a damaged spill file a salvage recovered or lost. */
  readonly salvaged: Counter<'outcome'>;
  readonly reconnects: Counter;
  readonly sent: Counter;
  readonly acked: Counter;
  /** Bound into the buffer's counters interface. */
  recordDrop(reason: DropReason, count: number): void;
}

/**
 * How often the event loop delay histogram (nodejs_eventloop_lag_p50_seconds and its siblings)
 * takes a sample. prom-client's default, 10 ms, is a timer firing 100 times a second in an idle
 * process: 0.24 CPU-s a minute measured alone, half of an idle collector's CPU. Once a second, a
 * stall that spans a sample is measured whole; one shorter than a second may fall between two.
 * nodejs_eventloop_lag_seconds is measured at each scrape, as before.
 */
export const EVENT_LOOP_SAMPLE_INTERVAL_MS = 1000;

export function createCollectorMetrics(
  sources: CollectorMetricSources,
  labels: { version: string; clusterId: string; agentId: string },
): CollectorMetrics {
  const registry = new Registry();
  collectDefaultMetrics({
    register: registry,
    prefix: 'kubexa_collector_',
    eventLoopMonitoringPrecision: EVENT_LOOP_SAMPLE_INTERVAL_MS,
  });
  const registers = [registry];
  const stream = sources.streamCounters?.bind(sources);

  new Gauge({
    name: 'kubexa_collector_info',
    help: 'Build and identity of this collector; always 1.',
    labelNames: ['version', 'cluster_id', 'agent_id'],
    registers,
  }).set({ version: labels.version, cluster_id: labels.clusterId, agent_id: labels.agentId }, 1);

  new Gauge({
    name: 'kubexa_collector_buffer_items',
    help: 'Items held by the buffer, per tier (memory includes in-flight items read from memory).',
    labelNames: ['tier'],
    registers,
    collect() {
      const stats = sources.bufferStats();
      this.set({ tier: 'memory' }, stats.memory.depth);
      this.set({ tier: 'disk' }, stats.disk.depth);
    },
  });
  new Gauge({
    name: 'kubexa_collector_buffer_bytes',
    help: 'Payload bytes held by the buffer, per tier.',
    labelNames: ['tier'],
    registers,
    collect() {
      const stats = sources.bufferStats();
      this.set({ tier: 'memory' }, stats.memory.bytes);
      this.set({ tier: 'disk' }, stats.disk.bytes);
    },
  });
  new Gauge({
    name: 'kubexa_collector_buffer_disk_state',
    help: 'Disk tier state: available (0 = running memory-only after an unopenable database) and full (1 while disk writes are paused).',
    labelNames: ['condition'],
    registers,
    collect() {
      const stats = sources.bufferStats();
      this.set({ condition: 'available' }, stats.diskAvailable ? 1 : 0);
      this.set({ condition: 'full' }, stats.diskFull ? 1 : 0);
    },
  });
  new Gauge({
    name: 'kubexa_collector_buffer_head_returns',
    help: 'Times the oldest unsettled item came back unsettled while it was the oldest (0: none came back). Readiness calls 3 stuck.',
    registers,
    collect() {
      this.set(sources.bufferStats().head?.returns ?? 0);
    },
  });
  new Gauge({
    name: 'kubexa_collector_inflight_items',
    help: 'Items sent to the gateway and not yet settled.',
    registers,
    collect() {
      this.set(sources.bufferStats().inflight);
    },
  });
  new Gauge({
    name: 'kubexa_collector_gateway_connection_state',
    help: 'Gateway stream state: 1 for the current state, 0 for the others.',
    labelNames: ['state'],
    registers,
    collect() {
      const current = sources.connectionState();
      for (const state of CONNECTION_STATES) this.set({ state }, state === current ? 1 : 0);
    },
  });
  new Gauge({
    name: 'kubexa_collector_heartbeat_age_seconds',
    help: 'Seconds since the last heartbeat was sent; -1 before the first.',
    registers,
    collect() {
      const last = sources.lastHeartbeatAt();
      this.set(last === undefined ? -1 : (sources.now() - last) / 1000);
    },
  });

  new Counter({
    name: 'kubexa_collector_gateway_stalled_sessions_total',
    help: 'Gateway sessions ended because items awaited an ack (or writes awaited the gateway) with no progress for the stall timeout.',
    registers,
    collect: follow(stream && (() => stream().stalls)),
  });

  const dropped = new Counter({
    name: 'kubexa_collector_buffer_dropped_items_total',
    help: 'Items that left the buffer without delivery, by reason.',
    labelNames: ['reason'],
    registers,
  });
  return {
    registry,
    spilled: new Counter({
      name: 'kubexa_collector_buffer_spilled_items_total',
      help: 'Items written from memory to the disk tier.',
      registers,
    }),
    replayed: new Counter({
      name: 'kubexa_collector_buffer_replayed_items_total',
      help: 'Items read back from the disk tier and handed to the gateway stream.',
      registers,
    }),
    dropped,
    salvaged: new Counter({
      name: 'kubexa_collector_buffer_salvaged_rows_total',
      help: 'Rows of a damaged spill file copied into the fresh one (outcome="recovered") or unreadable (outcome="lost").',
      labelNames: ['outcome'],
      registers,
    }),
    reconnects: new Counter({
      name: 'kubexa_collector_gateway_reconnects_total',
      help: 'Gateway stream reconnect attempts.',
      registers,
      collect: follow(stream && (() => stream().reconnects)),
    }),
    sent: new Counter({
      name: 'kubexa_collector_gateway_sent_items_total',
      help: 'Items written to the gateway stream.',
      registers,
      collect: follow(stream && (() => stream().sent)),
    }),
    acked: new Counter({
      name: 'kubexa_collector_gateway_acked_items_total',
      help: 'Items the gateway acknowledged.',
      registers,
      collect: follow(stream && (() => stream().settled)),
    }),
    recordDrop(reason, count) {
      dropped.inc({ reason }, count);
    },
  };
}

/** What the pod-log source reports at scrape time (its PodLogSourceStats). */
export interface PodLogGaugeSource {
  stats(): {
    readonly activeStreams: number;
    readonly queuedContainers: number;
    readonly unreleasedBatches: number;
  };
}

/** The pod-log source's counters, bound to its PodLogCounters interface. */
export interface PodLogMetrics {
  /**
   * The drops and truncations below, cumulative since process start, for the gateway
   * heartbeat: one count feeds both, so the heartbeat and /metrics cannot disagree.
   */
  ingestTotals(): SourceCounters;
  linesRead(count: number): void;
  bytesRead(count: number): void;
  dropped(reason: string, count: number): void;
  /** Lines cut to max_line_bytes (forwarded, flagged truncated). */
  truncated(count: number): void;
  reconnects(count: number): void;
  streamErrors(kind: string): void;
  streamBackoffs(state: string): void;
}

/** The heartbeat field each pod-log drop reason adds to. */
const HEARTBEAT_DROP_FIELDS: Readonly<Record<string, keyof SourceCounters>> = {
  too_old: 'droppedTooOld',
  future: 'droppedFuture',
  rate_limited: 'droppedRateLimited',
};

/**
 * Registers the pod-log source's metrics on the collector's registry. `source` is read at
 * scrape time; it is a getter because the source is built after the registry.
 */
export function registerPodLogMetrics(
  registry: Registry,
  source: () => PodLogGaugeSource | undefined,
): PodLogMetrics {
  const registers = [registry];
  const gauge = (name: string, help: string, read: (s: PodLogGaugeSource) => number) =>
    new Gauge({
      name,
      help,
      registers,
      collect() {
        const current = source();
        this.set(current === undefined ? 0 : read(current));
      },
    });
  gauge(
    'kubexa_collector_log_active_streams',
    'Open pod log follow streams.',
    (s) => s.stats().activeStreams,
  );
  gauge(
    'kubexa_collector_log_queued_containers',
    'Eligible containers waiting for a stream slot (the concurrent stream cap is reached).',
    (s) => s.stats().queuedContainers,
  );
  gauge(
    'kubexa_collector_log_checkpoint_lag_batches',
    'Log batches handed to the buffer and not yet durable, so their checkpoint has not advanced.',
    (s) => s.stats().unreleasedBatches,
  );
  const lines = new Counter({
    name: 'kubexa_collector_log_lines_read_total',
    help: 'Log lines read from the API server.',
    registers,
  });
  const bytes = new Counter({
    name: 'kubexa_collector_log_bytes_read_total',
    help: 'Log bytes read from the API server.',
    registers,
  });
  const dropped = new Counter({
    name: 'kubexa_collector_log_dropped_lines_total',
    help: 'Log lines not forwarded, by reason (rate_limited, too_old, future).',
    labelNames: ['reason'],
    registers,
  });
  const truncated = new Counter({
    name: 'kubexa_collector_log_truncated_lines_total',
    help: 'Log lines cut to max_line_bytes; they are forwarded, flagged truncated.',
    registers,
  });
  const totals: Record<keyof SourceCounters, number> = {
    truncatedLines: 0,
    droppedTooOld: 0,
    droppedFuture: 0,
    droppedRateLimited: 0,
  };
  const reconnects = new Counter({
    name: 'kubexa_collector_log_stream_reconnects_total',
    help: 'Follow streams reopened from their position after a cut.',
    registers,
  });
  const errors = new Counter({
    name: 'kubexa_collector_log_stream_errors_total',
    help: 'Follow stream failures, by kind.',
    labelNames: ['kind'],
    registers,
  });
  const backoffs = new Counter({
    name: 'kubexa_collector_log_stream_backoffs_total',
    help: 'Follow streams the API server ended with nothing new (a container not running), reopened after backoff, by container state.',
    labelNames: ['state'],
    registers,
  });
  return {
    streamBackoffs: (state) => {
      backoffs.inc({ state });
    },
    linesRead: (count) => {
      lines.inc(count);
    },
    bytesRead: (count) => {
      bytes.inc(count);
    },
    dropped: (reason, count) => {
      dropped.inc({ reason }, count);
      const field = HEARTBEAT_DROP_FIELDS[reason];
      if (field !== undefined) totals[field] += count;
    },
    truncated: (count) => {
      truncated.inc(count);
      totals.truncatedLines += count;
    },
    ingestTotals: () => ({ ...totals }),
    reconnects: (count) => {
      reconnects.inc(count);
    },
    streamErrors: (kind) => {
      errors.inc({ kind });
    },
  };
}
