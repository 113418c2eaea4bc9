import type { ConsoleHandler, NodeJobHandler } from './session.js';
import type { Logger } from 'pino';
import type { Clock } from '../../shared/clock.js';
import type { BufferItem, BufferStats, DropReason, QuarantineReason } from '../buffer/types.js';
import type { ConfigUpdate, ResourceQuery, ResourceQueryResult } from '../../proto/index.js';

/** What the stream needs from the durable buffer (DurableBuffer satisfies it). */
export interface GatewayBuffer {
  take(max: number): BufferItem[];
  ack(ids: Iterable<string>): number;
  discard(ids: Iterable<string>, reason?: DropReason): number;
  /** Sets in-flight items aside (the quarantine table) instead of delivering them. */
  quarantine(ids: Iterable<string>, reason?: QuarantineReason): number;
  requeue(ids?: Iterable<string>): number;
  waitForItems(signal: AbortSignal): Promise<void>;
  stats(): BufferStats;
}

/** Cumulative counters a heartbeat reports that the sources own (log truncation, age filters). */
/** The heartbeat's `metrics_api`: whether metrics.k8s.io answered the last scrape; "" unknown. */
export type MetricsApiState = 'available' | 'unavailable' | '';

export interface SourceCounters {
  readonly truncatedLines: number;
  readonly droppedTooOld: number;
  readonly droppedFuture: number;
  readonly droppedRateLimited: number;
}

/** Cumulative since the stream was created. */
export interface StreamCounters {
  /** Buffered items written to the stream (redeliveries included). */
  sent: number;
  /** Items settled: by the gateway's Ack, or by the write for a gateway without acks. */
  settled: number;
  /** Items returned to the buffer after the redelivery timeout. */
  redelivered: number;
  /** Items discarded after maxAttempts failed deliveries. */
  droppedAttempts: number;
  /** Sessions started after the first. */
  reconnects: number;
  /** Sessions ended by the stall deadline: work outstanding and no progress from the gateway. */
  stalls: number;
  heartbeats: number;
  /** Gateway messages received. */
  received: number;
}

/** Answers a live query; until the query component lands the default refuses every query. */
export type QueryHandler = (
  query: ResourceQuery,
  signal: AbortSignal,
) => Promise<ResourceQueryResult>;

export interface GatewayStreamDeps {
  readonly logger: Logger;
  readonly buffer: GatewayBuffer;
  readonly clock?: Clock;
  /** [0, 1), for backoff jitter. */
  readonly random?: () => number;
  readonly sourceCounters?: () => SourceCounters;
  /**
   * Items the buffer has set aside in its quarantine (cumulative), for the heartbeat's
   * `quarantined_messages`; 0 without it. The hook for the buffer's `stats().quarantined`.
   */
  readonly quarantinedItems?: () => number;
  /**
   * Whether metrics.k8s.io answered the last scrape, for the heartbeat's `metrics_api`:
   * "available", "unavailable", or "" (not scraped); "" without it.
   */
  readonly metricsApi?: () => MetricsApiState;
  /** The rest of a ConfigUpdate (ingest rules, watchers, collectors): applied by its owners. */
  readonly onConfigUpdate?: (update: ConfigUpdate) => void;
  /** Each accepted handshake's opt-ins (accepted_payloads), before its config is applied. */
  readonly onHandshake?: (accepted: { acceptedPayloads: readonly string[] }) => void;
  readonly queryHandler?: QueryHandler;
  /** Console requests (collector/consoles); absent: console requests are ignored and logged. */
  readonly consoleHandler?: ConsoleHandler;
  /** Node jobs and mutations (collector/executor-client); absent: ignored and logged. */
  readonly nodeJobHandler?: NodeJobHandler;
}
