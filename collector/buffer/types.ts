import type { Logger } from 'pino';

/**
 * What an item carries decides what the overflow policy may drop: logs first, then metrics,
 * state last. The order of this list is that drop order.
 */
export const ITEM_KINDS = ['log', 'metric', 'state', 'audit'] as const;
/** Audit records are never dropped by the overflow policy (they may exceed the memory cap). */
export const NEVER_DROPPED: ItemKind = 'audit';
export type ItemKind = (typeof ITEM_KINDS)[number];

/** One buffered message: `id` is the AgentMessage.message_id, unique, the target of an Ack. */
export interface BufferItem {
  readonly id: string;
  readonly kind: ItemKind;
  readonly payload: Uint8Array;
}

/** Why an item left the buffer without being acknowledged. Every drop is counted. */
export const DROP_REASONS = [
  'overflow_log',
  'overflow_metric',
  'overflow_state',
  // Never counted: audit items are not dropped by the overflow policy (listed for the type).
  'overflow_audit',
  'too_large',
  'disk_error',
  'discarded',
  'quarantined',
  'closed',
] as const;
export type DropReason = (typeof DROP_REASONS)[number];

/** Typed handles for the buffer's metrics; main.ts binds them to prom-client. */
export interface BufferCounters {
  spilled(count: number): void;
  replayed(count: number): void;
  dropped(reason: DropReason, count: number): void;
  /** Rows a salvage of a damaged spill file copied into the fresh one, and rows it lost. */
  salvaged?(recovered: number, lost: number): void;
}

export const noopBufferCounters: BufferCounters = {
  spilled: () => undefined,
  replayed: () => undefined,
  dropped: () => undefined,
  salvaged: () => undefined,
};

/** Why a record was set aside in the quarantine table instead of being delivered. */
export type QuarantineReason =
  /** Its stored checksum does not match what was read back: the record is damaged. */
  | 'checksum'
  /** The gateway could not decode it, or sessions kept ending on it. */
  | 'rejected';

/**
 * The oldest unsettled item, once it has been handed out and returned (session lost, no ack
 * in time). The same head returned again and again, with nothing behind it moving, is a stuck
 * queue: readiness reports it.
 */
export interface HeadOfQueue {
  readonly id: string;
  /** Times this item came back unsettled while it was the oldest. */
  readonly returns: number;
  /** Clock time it first came back as the oldest. */
  readonly since: number;
}

export interface TierStats {
  /** Items whose payload lives in this tier (memory: pending, returned and in flight). */
  readonly depth: number;
  readonly bytes: number;
}

export interface BufferStats {
  readonly memory: TierStats;
  /** Rows in the database: pending, returned or in flight. */
  readonly disk: TierStats;
  /** Items waiting to be taken. */
  readonly pending: number;
  /** Items taken and not yet settled. */
  readonly inflight: number;
  /** Items written to disk (spills, large items, and memory flushed by close()). */
  readonly spilled: number;
  /** Items read back from disk and handed out. */
  readonly replayed: number;
  /** Unacknowledged items found on disk when this instance opened. */
  readonly recovered: number;
  readonly dropped: Readonly<Record<DropReason, number>>;
  /**
   * Records set aside in the quarantine table by this process (a failed checksum, or refused by
   * the gateway); also counted in `dropped.quarantined`. For heartbeats and metrics.
   */
  readonly quarantined: number;
  /** Rows a salvage of a damaged spill file recovered and lost, since this process started. */
  readonly salvage: { readonly recovered: number; readonly lost: number };
  /** The oldest unsettled item if it has come back unsettled; undefined otherwise. */
  readonly head: HeadOfQueue | undefined;
  /**
   * False when the spill database could not be opened (at start, or again after a corrupt file
   * was moved aside): the buffer runs memory-only, nothing survives a restart. For readiness.
   */
  readonly diskAvailable: boolean;
  /**
   * True while disk writes are paused after SQLite ran out of room (SQLITE_FULL) or failed to
   * write (an I/O error): the disk tier counts as full, and the overflow policy drops.
   */
  readonly diskFull: boolean;
}

export interface BufferOptions {
  /** The SQLite file (on the PVC in production). Its directory must exist. */
  readonly path: string;
  readonly maxMemoryBytes: number;
  readonly maxDiskBytes: number;
  /**
   * SQLite synchronous mode in WAL. `normal` (default): commits survive a process crash
   * (SIGKILL, OOM kill) but the last ones may roll back on power loss; `full` fsyncs every
   * commit.
   */
  readonly synchronous?: 'normal' | 'full';
}

export interface BufferDeps {
  readonly logger: Logger;
  readonly counters?: BufferCounters;
  /** Wall clock for the suffix of a moved-aside database file and the disk-full pause. */
  readonly now?: () => number;
}

/** Accounting size of an item: payload, id and a fixed per-item overhead. */
export const ITEM_OVERHEAD_BYTES = 32;
export function itemBytes(item: BufferItem): number {
  return item.payload.byteLength + item.id.length + ITEM_OVERHEAD_BYTES;
}

/** Receives the ids of items their producer never needs to resend (see DurableBuffer.onRelease). */
export type ReleaseListener = (ids: readonly string[]) => void;
