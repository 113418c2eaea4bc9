import type { Logger } from 'pino';
import { getErrorMessage } from '../../shared/errors.js';
import { MemoryQueue, type MemoryItem } from './memory-queue.js';
import type { SalvageReport } from '../sqlite/salvage.js';
import { isCorruption, isDiskFull, sqliteCode } from '../sqlite/sqlite-errors.js';
import { openSpillDatabase } from './open-spill-database.js';
import { SpillStore, type ReadRow, type SpillRow } from './spill-store.js';
import {
  DROP_REASONS,
  ITEM_KINDS,
  NEVER_DROPPED,
  itemBytes,
  noopBufferCounters,
  type BufferCounters,
  type BufferDeps,
  type BufferItem,
  type BufferOptions,
  type BufferStats,
  type DropReason,
  type HeadOfQueue,
  type ItemKind,
  type QuarantineReason,
  type ReleaseListener,
} from './types.js';

/** An item handed out or returned: its payload stays in memory, or (undefined) on disk. */
interface HeldItem {
  readonly seq: number;
  readonly id: string;
  readonly kind: ItemKind;
  readonly bytes: number;
  readonly payload: Uint8Array | undefined;
}

/** Disk rows read ahead of the consumer, so replay is one query per page, not per item. */
const READ_AHEAD_ROWS = 512;
/** A spill frees this much beyond the need (capped by a quarter of memory): one commit per MiB. */
const SPILL_SLACK_BYTES = 1024 * 1024;
/** After SQLITE_FULL or a write error, the disk tier counts as full this long before a retry. */
const DISK_FULL_RETRY_MS = 10_000;

/** The memory tier's size while the process is short of heap: items spill almost at once. */
export const PRESSURE_MEMORY_BYTES = 256 * 1024;

const overflowReason = (kind: ItemKind): DropReason => `overflow_${kind}`;
const rank = (kind: ItemKind): number => ITEM_KINDS.indexOf(kind);

/**
 * A FIFO of gateway messages in two tiers: memory up to `maxMemoryBytes`, then SQLite up to
 * `maxDiskBytes`. Every item has a global sequence number; the oldest pending items are always
 * the ones spilled, so "disk before memory" is FIFO. Items leave only when settled by id
 * (`ack`) or dropped by the overflow policy, each drop counted by reason. See docs/buffer.md.
 *
 * Order of delivery: returned items (oldest first), then never-taken disk rows, then memory.
 * Every returned item was taken before any never-taken item existed or while it was newer, so
 * that order is the sequence order.
 */
export class DurableBuffer implements AsyncDisposable {
  readonly #options: Required<BufferOptions>;
  readonly #logger: Logger;
  readonly #counters: BufferCounters;
  readonly #now: () => number;
  /** Undefined: the database could not be opened, and the buffer runs memory-only. */
  #store: SpillStore | undefined;
  /** Set by SQLITE_FULL or a write error: the disk holds no more than `bytes` until `until`. */
  #diskFull: { bytes: number; until: number } | undefined;

  readonly #memory = new MemoryQueue();
  /** maxMemoryBytes, or PRESSURE_MEMORY_BYTES while the process is short of heap (shedMemory). */
  #memoryLimit: number;
  /** Bytes of every item whose payload is only in memory: pending, returned and in flight. */
  #memoryBytes = 0;
  #memoryDepth = 0;
  /** Returned items, sorted by seq, served before anything else. */
  #returned: HeldItem[] = [];
  readonly #inflight = new Map<string, HeldItem>();

  #diskRows = 0;
  #diskBytes = 0;
  /** Rows never handed out have seq > #diskCursor; #diskPending counts them. */
  #diskCursor = 0;
  #diskPending = 0;
  /** The newest seq written to disk: the cursor skips to it when pending rows cannot be read. */
  #diskMaxSeq = 0;
  #readAhead: ReadRow[] = [];

  #nextSeq: number;
  #spilled = 0;
  #replayed = 0;
  readonly #recovered: number;
  #quarantined = 0;
  readonly #salvage = { recovered: 0, lost: 0 };
  /** The oldest unsettled item once it has come back unsettled (see HeadOfQueue). */
  #head: (HeadOfQueue & { readonly seq: number }) | undefined;
  readonly #dropped = Object.fromEntries(DROP_REASONS.map((r) => [r, 0])) as Record<
    DropReason,
    number
  >;
  #waiters: (() => void)[] = [];
  readonly #releaseListeners = new Set<ReleaseListener>();
  #closed: Promise<void> | undefined;

  constructor(options: BufferOptions, deps: BufferDeps) {
    this.#options = { synchronous: 'normal', ...options };
    this.#memoryLimit = options.maxMemoryBytes;
    this.#logger = deps.logger.child({ component: 'buffer' });
    this.#counters = deps.counters ?? noopBufferCounters;
    this.#now = deps.now ?? Date.now;
    const totals = this.#openAtStart();
    this.#diskRows = totals.count;
    this.#diskBytes = totals.bytes;
    this.#diskPending = totals.count;
    this.#nextSeq = totals.maxSeq + 1;
    this.#diskMaxSeq = totals.maxSeq;
    this.#recovered = totals.count;
    if (totals.count > 0) {
      this.#logger.info(
        { items: totals.count, bytes: totals.bytes },
        'replaying unacknowledged items from disk',
      );
    }
  }

  /**
   * Adds an item. Never throws: a full buffer (or a full disk) drops by the overflow policy, a
   * failing disk is logged and counted.
   */
  enqueue(item: BufferItem): void {
    const bytes = itemBytes(item);
    if (this.#closed) {
      this.#drop('closed', 1);
      return;
    }
    // An item the disk cannot hold could never survive a restart, and parked in memory it
    // would block every later spill.
    if (bytes > this.#options.maxDiskBytes) {
      this.#logger.warn({ id: item.id, kind: item.kind, bytes }, 'item larger than the disk cap');
      this.#drop('too_large', 1);
      return;
    }
    const entry: MemoryItem = {
      seq: this.#nextSeq++,
      id: item.id,
      kind: item.kind,
      bytes,
      payload: item.payload,
    };
    if (this.#place(entry)) this.#notify();
  }

  /** Hands out up to `max` items, oldest first; they stay in flight until ack or requeue. */
  take(max: number): BufferItem[] {
    const out: BufferItem[] = [];
    if (this.#closed) return out;
    while (out.length < max) {
      const next = this.#next();
      if (!next) break;
      const { held } = next;
      const payload = next.payload ?? this.#readBack(held);
      if (payload === undefined) continue;
      this.#inflight.set(held.id, held);
      out.push({ id: held.id, kind: held.kind, payload });
    }
    return out;
  }

  /** Settles items by id; unknown ids are ignored. Returns how many were settled. */
  ack(ids: Iterable<string>): number {
    const diskSeqs: number[] = [];
    const settled: string[] = [];
    for (const id of ids) {
      const held = this.#inflight.get(id);
      if (!held) continue;
      this.#inflight.delete(id);
      settled.push(id);
      if (held.seq === this.#head?.seq) this.#head = undefined;
      if (held.payload === undefined) {
        diskSeqs.push(held.seq);
        this.#forgetDiskRow(held.bytes);
      } else {
        this.#memoryBytes -= held.bytes;
        this.#memoryDepth--;
      }
    }
    if (diskSeqs.length > 0 && !this.#closed) {
      // A failed delete only means redelivery after a restart (the gateway dedups by id).
      this.#withDisk('delete acked rows', (store) => store.delete(diskSeqs));
    }
    this.#release(settled);
    return settled.length;
  }

  /** Settles in-flight items without delivery (e.g. attempts exhausted), counted as dropped. */
  discard(ids: Iterable<string>, reason: DropReason = 'discarded'): number {
    const settled = this.ack(ids);
    this.#drop(reason, settled);
    return settled;
  }

  /**
   * Sets in-flight items aside in the quarantine table instead of delivering them: the gateway
   * could not decode them, or sessions kept ending on them. They are settled (released, never
   * sent again) and counted as `quarantined`; the table keeps them for a human (docs/buffer.md).
   */
  quarantine(ids: Iterable<string>, reason: QuarantineReason = 'rejected'): number {
    let count = 0;
    for (const id of ids) {
      const held = this.#inflight.get(id);
      if (!held) continue;
      if (!this.#closed) {
        this.#withDisk('quarantine', (store) => {
          if (held.payload === undefined) store.quarantineRow(held.seq, reason, this.#now());
          else store.quarantineItem({ ...held, payload: held.payload }, reason, this.#now());
        });
      }
      // Settled like an ack, minus the row delete the quarantine move already did.
      this.#inflight.delete(id);
      if (held.seq === this.#head?.seq) this.#head = undefined;
      if (held.payload === undefined) this.#forgetDiskRow(held.bytes);
      else {
        this.#memoryBytes -= held.bytes;
        this.#memoryDepth--;
      }
      this.#countQuarantined(held, reason);
      this.#release([id]);
      count++;
    }
    return count;
  }

  /**
   * Returns in-flight items (all of them, or those listed) to the front of the queue in their
   * original order: on session loss or a redelivery timeout. Returns how many.
   */
  requeue(ids?: Iterable<string>): number {
    const back: HeldItem[] = [];
    for (const id of ids ?? [...this.#inflight.keys()]) {
      const held = this.#inflight.get(id);
      if (!held) continue;
      this.#inflight.delete(id);
      back.push(held);
    }
    if (back.length === 0) return 0;
    this.#returned = [...this.#returned, ...back].sort((a, b) => a.seq - b.seq);
    this.#trackHead();
    this.#notify();
    return back.length;
  }

  /** Resolves once at least one item is pending; rejects when `signal` aborts or on close. */
  waitForItems(signal: AbortSignal): Promise<void> {
    if (this.#pendingCount() > 0) return Promise.resolve();
    if (signal.aborted) return Promise.reject(signal.reason as Error);
    if (this.#closed) return Promise.reject(new Error('buffer is closed'));
    return new Promise<void>((resolve, reject) => {
      const onAbort = (): void => {
        this.#waiters = this.#waiters.filter((w) => w !== wake);
        reject(signal.reason as Error);
      };
      const wake = (): void => {
        signal.removeEventListener('abort', onAbort);
        if (this.#closed) reject(new Error('buffer is closed'));
        else resolve();
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.#waiters.push(wake);
    });
  }

  /**
   * Subscribes to releases: ids whose producer never needs to resend them, because the item
   * is committed to disk (a spill, or the flush in close()), acknowledged, or dropped by the
   * overflow policy. A producer that checkpoints its input (the pod log source) advances its
   * checkpoint only on release, so a crash never skips an item held only in memory. An id may
   * be released more than once (spilled, then acked). Returns the unsubscribe function.
   */
  onRelease(listener: ReleaseListener): () => void {
    this.#releaseListeners.add(listener);
    return () => this.#releaseListeners.delete(listener);
  }

  /**
   * Heap pressure (the process nears its heap limit, see collector/runtime/heap-watch.ts): with
   * `true`, the pending items held in memory are written to disk now, oldest first, and until
   * `shedMemory(false)` the memory tier holds at most PRESSURE_MEMORY_BYTES, so new items spill
   * at once. Nothing is dropped for it: what the disk cannot take stays in memory. Returned and
   * in-flight items stay (the stream's window bounds them). Memory-only buffers move nothing.
   */
  shedMemory(pressure: boolean): { readonly items: number; readonly bytes: number } {
    this.#memoryLimit = pressure
      ? Math.min(this.#options.maxMemoryBytes, PRESSURE_MEMORY_BYTES)
      : this.#options.maxMemoryBytes;
    if (!pressure || !this.#store || this.#closed) return { items: 0, bytes: 0 };
    const room = this.#diskCap() - this.#diskBytes;
    let count = 0;
    let bytes = 0;
    while (this.#memoryBytes - bytes > this.#memoryLimit) {
      const next = this.#memory.at(count);
      if (!next || bytes + next.bytes > room) break;
      bytes += next.bytes;
      count++;
    }
    if (count === 0) return { items: 0, bytes: 0 };
    const batch: MemoryItem[] = [];
    for (let i = 0; i < count; i++) {
      const item = this.#memory.at(i);
      if (item) batch.push(item);
    }
    if (!this.#writeRows(batch)) return { items: 0, bytes: 0 };
    this.#memory.shiftMany(count);
    this.#memoryBytes -= bytes;
    this.#memoryDepth -= count;
    return { items: count, bytes };
  }

  stats(): BufferStats {
    return {
      memory: { depth: this.#memoryDepth, bytes: this.#memoryBytes },
      disk: { depth: this.#diskRows, bytes: this.#diskBytes },
      pending: this.#pendingCount(),
      inflight: this.#inflight.size,
      spilled: this.#spilled,
      replayed: this.#replayed,
      recovered: this.#recovered,
      dropped: { ...this.#dropped },
      quarantined: this.#quarantined,
      salvage: { ...this.#salvage },
      head: this.#head && {
        id: this.#head.id,
        returns: this.#head.returns,
        since: this.#head.since,
      },
      diskAvailable: this.#store !== undefined,
      diskFull: this.#diskFullBytes() !== undefined,
    };
  }

  /**
   * Writes every item held only in memory (pending, returned and in flight) to disk and closes
   * the database. Idempotent. The disk cap may be exceeded here by at most maxMemoryBytes: a
   * graceful stop never drops, and the next start trims by the overflow policy if it must.
   */
  close(): Promise<void> {
    this.#closed ??= Promise.resolve().then(() => {
      const rows: SpillRow[] = [...this.#returned, ...this.#inflight.values()]
        .filter((h): h is HeldItem & { payload: Uint8Array } => h.payload !== undefined)
        .map((h) => ({ ...h }));
      rows.push(...this.#memory.shiftMany(this.#memory.length));
      const store = this.#store;
      try {
        if (!store) throw new Error('no spill database (running memory-only)');
        store.insert(rows);
        this.#countSpilled(rows.length);
        this.#release(rows.map((row) => row.id));
      } catch (err: unknown) {
        if (rows.length > 0) {
          this.#logger.error(
            { err, items: rows.length },
            'could not flush memory to disk on close',
          );
          this.#drop('disk_error', rows.length);
        }
      }
      this.#closeStore();
      for (const wake of this.#waiters.splice(0)) wake();
    });
    return this.#closed;
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  // ---- placement and overflow ----

  /** Puts a new item in memory, spilling the oldest to disk as needed. False if dropped. */
  #place(entry: MemoryItem): boolean {
    const maxMemoryBytes = this.#memoryLimit;
    if (this.#memoryBytes + entry.bytes <= maxMemoryBytes) {
      this.#pushMemory(entry);
      return true;
    }
    const slack = Math.min(SPILL_SLACK_BYTES, Math.floor(maxMemoryBytes / 4));
    if (this.#trySpill(entry, slack) || this.#trySpill(entry, 0)) return true;
    return this.#overflow(entry);
  }

  /**
   * Spills the oldest pending memory items until `entry` fits with `slack` to spare; if memory
   * is still too full (returned and in-flight items are never spilled), the entry itself goes
   * to disk after them. Does nothing and returns false if disk cannot take it all.
   */
  #trySpill(entry: MemoryItem, slack: number): boolean {
    if (!this.#store) return false;
    const excess = this.#memoryBytes + entry.bytes + slack - this.#memoryLimit;
    let count = 0;
    let bytes = 0;
    while (bytes < excess) {
      const next = this.#memory.at(count);
      if (!next) break;
      bytes += next.bytes;
      count++;
    }
    const entryToDisk = this.#memoryBytes - bytes + entry.bytes > this.#memoryLimit;
    const needed = bytes + (entryToDisk ? entry.bytes : 0);
    if (this.#diskBytes + needed > this.#diskCap()) return false;
    const batch: MemoryItem[] = [];
    for (let i = 0; i < count; i++) {
      const item = this.#memory.at(i);
      if (item) batch.push(item);
    }
    if (entryToDisk) batch.push(entry);
    // Written first, moved after: if the disk refuses (full, failing), memory is untouched and
    // the overflow policy decides what to drop.
    if (!this.#writeRows(batch)) return false;
    this.#memory.shiftMany(count);
    this.#memoryBytes -= bytes;
    this.#memoryDepth -= count;
    if (!entryToDisk) this.#pushMemory(entry);
    return true;
  }

  /**
   * Both tiers are full (at their configured sizes: under heap pressure the disk can be full
   * while memory still has room, and pressure alone never drops anything). Frees room by dropping the oldest never-taken items, logs first, then
   * metrics, then state, but never an item of a more protected kind than `entry`: an incoming
   * log may only displace logs. Disk rows are older than memory items, so disk goes first
   * within a kind. If nothing may be dropped, the entry itself is dropped. Always counted.
   */
  #overflow(entry: MemoryItem): boolean {
    const droppable = ITEM_KINDS.slice(0, rank(entry.kind) + 1).filter((k) => k !== NEVER_DROPPED);
    for (const kind of droppable) {
      const diskShort = this.#diskBytes + this.#minimalSpillBytes(entry) - this.#diskCap();
      if (diskShort > 0) this.#evictDisk(kind, diskShort);
      if (this.#trySpill(entry, 0)) return true;
      const memoryShort = this.#memoryBytes + entry.bytes - this.#options.maxMemoryBytes;
      this.#evictMemory(kind, memoryShort);
      if (this.#memoryBytes + entry.bytes <= this.#options.maxMemoryBytes) {
        this.#pushMemory(entry);
        return true;
      }
    }
    if (entry.kind === NEVER_DROPPED) {
      // An audit record is small and rare; it is kept above the memory cap rather than lost.
      this.#logger.warn(
        { id: entry.id, bytes: entry.bytes },
        'buffer full: audit record kept above the cap',
      );
      this.#pushMemory(entry);
      return true;
    }
    this.#drop(overflowReason(entry.kind), 1);
    return false;
  }

  /** Disk bytes a spill needs for `entry` to fit, with no slack. */
  #minimalSpillBytes(entry: MemoryItem): number {
    const excess = this.#memoryBytes + entry.bytes - this.#options.maxMemoryBytes;
    let bytes = 0;
    for (let i = 0; bytes < excess; i++) {
      const next = this.#memory.at(i);
      if (!next) return bytes + entry.bytes;
      bytes += next.bytes;
    }
    return bytes;
  }

  #evictDisk(kind: ItemKind, bytes: number): void {
    const refs = this.#withDisk('find rows to drop', (store) =>
      store.oldestOfKind(kind, this.#diskCursor, bytes),
    );
    if (!refs || refs.length === 0) return;
    // undefined: the delete failed and was logged (a reset disk counted its rows as disk_error).
    const deleted = this.#withDisk('drop rows', (store) => store.delete(refs.map((r) => r.seq)));
    if (deleted === undefined) return;
    for (const ref of refs) this.#forgetDiskRow(ref.bytes);
    this.#diskPending -= refs.length;
    this.#readAhead = [];
    this.#reportOverflow(kind, refs.length, 'disk');
  }

  #evictMemory(kind: ItemKind, bytes: number): void {
    const evicted = this.#memory.evictOldest(kind, bytes);
    if (evicted.length === 0) return;
    for (const item of evicted) this.#memoryBytes -= item.bytes;
    this.#memoryDepth -= evicted.length;
    this.#reportOverflow(kind, evicted.length, 'memory');
    this.#release(evicted.map((item) => item.id));
  }

  #reportOverflow(kind: ItemKind, count: number, tier: 'disk' | 'memory'): void {
    this.#drop(overflowReason(kind), count);
    // Logs are expected to be shed under pressure; state loss needs a human to look.
    const level = kind === 'state' ? 'error' : 'warn';
    this.#logger[level]({ kind, count, tier }, 'buffer full: dropped oldest items');
  }

  #pushMemory(entry: MemoryItem): void {
    this.#memory.push(entry);
    this.#memoryBytes += entry.bytes;
    this.#memoryDepth++;
  }

  /** Writes rows in one transaction; false (nothing written, logged) if the disk refused. */
  #writeRows(rows: readonly MemoryItem[]): boolean {
    const written = this.#withDisk('spill', (store) => {
      store.insert(rows);
      return true;
    });
    if (!written) return false;
    for (const row of rows) {
      this.#diskBytes += row.bytes;
      this.#diskMaxSeq = Math.max(this.#diskMaxSeq, row.seq);
    }
    this.#diskRows += rows.length;
    this.#diskPending += rows.length;
    this.#countSpilled(rows.length);
    this.#release(rows.map((row) => row.id));
    return true;
  }

  // ---- taking ----

  /** The next item in sequence order, with its payload if it is already at hand. */
  #next(): { held: HeldItem; payload: Uint8Array | undefined } | undefined {
    const returned = this.#returned.shift();
    if (returned) return { held: returned, payload: returned.payload };
    const row = this.#nextDiskRow();
    if (row) {
      // In flight, a disk item keeps only its reference: the row stays until it is acked.
      const held = {
        seq: row.seq,
        id: row.id,
        kind: row.kind,
        bytes: row.bytes,
        payload: undefined,
      };
      return { held, payload: row.payload };
    }
    const item = this.#memory.shift();
    return item ? { held: item, payload: item.payload } : undefined;
  }

  /** The next never-taken disk row whose checksum holds; damaged ones are quarantined. */
  #nextDiskRow(): SpillRow | undefined {
    for (;;) {
      if (this.#diskPending === 0) return undefined;
      if (this.#readAhead.length === 0) {
        const rows = this.#withDisk('read', (store) =>
          store.readAfter(this.#diskCursor, READ_AHEAD_ROWS),
        );
        if (rows === undefined) {
          this.#skipUnreadableRows();
          return undefined;
        }
        this.#readAhead = rows;
      }
      const row = this.#readAhead.shift();
      if (!row) {
        // The count said rows exist but none were found: only a reset disk gets here.
        this.#diskPending = 0;
        return undefined;
      }
      this.#diskCursor = row.seq;
      this.#diskPending--;
      if (!row.intact) {
        this.#quarantineDamaged(row);
        continue;
      }
      this.#replayed++;
      this.#counters.replayed(1);
      return row;
    }
  }

  /**
   * Reads a returned disk item's payload again. A missing row is counted as dropped, a damaged
   * one is quarantined; both give undefined.
   */
  #readBack(held: HeldItem): Uint8Array | undefined {
    const read = this.#withDisk('read back', (store) => ({ row: store.readPayload(held.seq) }));
    // undefined: the read failed and was logged. A reset disk counted its rows as disk_error
    // drops; otherwise the row stays in the file and is replayed by the next start.
    if (!read) return undefined;
    if (read.row === undefined) {
      this.#forgetDiskRow(held.bytes);
      this.#drop('disk_error', 1);
      return undefined;
    }
    if (!read.row.intact) {
      this.#quarantineDamaged(held);
      return undefined;
    }
    return read.row.payload;
  }

  /** A disk row whose checksum failed: moved to the quarantine table, counted, never sent. */
  #quarantineDamaged(row: { seq: number; id: string; kind: ItemKind; bytes: number }): void {
    const moved = this.#withDisk('quarantine', (store) =>
      store.quarantineRow(row.seq, 'checksum', this.#now()),
    );
    // undefined: the move failed and was logged; a reset disk counted its rows already.
    if (moved === undefined) return;
    this.#forgetDiskRow(row.bytes);
    if (row.seq === this.#head?.seq) this.#head = undefined;
    this.#countQuarantined(row, 'checksum');
    this.#release([row.id]);
  }

  #pendingCount(): number {
    return this.#returned.length + this.#diskPending + this.#memory.length;
  }

  // ---- disk faults ----

  /**
   * Runs a disk operation, never letting a SQLite error escape to the caller (enqueue, take,
   * ack and requeue run inside gRPC handlers and timers). Returns undefined when it failed:
   * - corruption (SQLITE_CORRUPT, SQLITE_NOTADB): the file is moved aside and a fresh one
   *   opened; whatever was only on disk is counted as dropped (`disk_error`);
   * - SQLITE_FULL, or any other error (I/O, read-only volume): the file stays, and the disk
   *   tier counts as full for DISK_FULL_RETRY_MS, so the overflow policy drops and counts.
   */
  #withDisk<T>(what: string, operation: (store: SpillStore) => T): T | undefined {
    const store = this.#store;
    if (!store) return undefined;
    try {
      return operation(store);
    } catch (err: unknown) {
      this.#onDiskError(what, err);
      return undefined;
    }
  }

  #onDiskError(what: string, err: unknown): void {
    const code = sqliteCode(err);
    if (isCorruption(err)) {
      this.#logger.error(
        { err, code, operation: what },
        `spill database corrupt: ${getErrorMessage(err)}`,
      );
      this.#resetDisk();
      return;
    }
    const full = isDiskFull(err);
    // The disk holds what it holds now; room freed by acks and drops is reused (SQLite keeps
    // freed pages), and after the pause the full cap is tried again.
    this.#diskFull = { bytes: this.#diskBytes, until: this.#now() + DISK_FULL_RETRY_MS };
    const context = { err, code, operation: what, diskBytes: this.#diskBytes };
    if (full) {
      this.#logger.warn(
        context,
        'spill disk full: the overflow policy applies until room frees up',
      );
    } else {
      this.#logger.error(
        context,
        `spill database ${what} failed (${getErrorMessage(err)}): file kept, disk writes paused`,
      );
    }
  }

  /** The disk tier's cap now: 0 without a database, what it held while full, else the option. */
  #diskCap(): number {
    if (!this.#store) return 0;
    return Math.min(this.#options.maxDiskBytes, this.#diskFullBytes() ?? Infinity);
  }

  #diskFullBytes(): number | undefined {
    if (this.#diskFull && this.#now() >= this.#diskFull.until) this.#diskFull = undefined;
    return this.#diskFull?.bytes;
  }

  /**
   * The pending disk rows cannot be read (an I/O error, not corruption): they stay in the file,
   * and the next start replays them. This process moves on to newer items instead of spinning.
   */
  #skipUnreadableRows(): void {
    if (this.#diskPending === 0) return;
    this.#logger.error(
      { items: this.#diskPending },
      'spilled items unreadable: left on disk for the next start',
    );
    this.#diskCursor = this.#diskMaxSeq;
    this.#diskPending = 0;
    this.#readAhead = [];
  }

  /**
   * The file was found damaged mid-run: its readable rows are salvaged into a fresh file and
   * the disk tier starts over from that file, as after a restart. Disk items in flight or
   * returned are forgotten here and replayed from the salvaged rows (a possible duplicate,
   * which the gateway drops by id); rows the salvage could not read are counted as disk_error.
   */
  #resetDisk(): void {
    this.#closeStore();
    const before = this.#diskRows;
    this.#returned = this.#returned.filter((h) => h.payload !== undefined);
    for (const [id, held] of this.#inflight) {
      if (held.payload === undefined) this.#inflight.delete(id);
    }
    if (this.#head && !this.#returned.some((h) => h.seq === this.#head?.seq)) {
      this.#head = undefined;
    }
    this.#readAhead = [];
    this.#diskFull = undefined;
    this.#diskCursor = 0;
    this.#store = this.#openStore(true);
    const totals = this.#readTotals();
    this.#diskRows = totals.count;
    this.#diskBytes = totals.bytes;
    this.#diskPending = totals.count;
    this.#drop('disk_error', before - totals.count);
  }

  /** Opens the database and reads its totals; memory-only (all zero) if either fails. */
  #openAtStart(): { count: number; bytes: number; maxSeq: number } {
    this.#store = this.#openStore(false);
    return this.#readTotals();
  }

  #readTotals(): { count: number; bytes: number; maxSeq: number } {
    try {
      return this.#store?.totals() ?? { count: 0, bytes: 0, maxSeq: 0 };
    } catch (err: unknown) {
      this.#logger.error(
        { err, path: this.#options.path },
        'spill database unreadable at start: running memory-only',
      );
      this.#closeStore();
      return { count: 0, bytes: 0, maxSeq: 0 };
    }
  }

  /** Opens the store, or logs and returns undefined (memory-only): never throws. */
  #openStore(damagedInUse: boolean): SpillStore | undefined {
    try {
      const { db, salvage } = openSpillDatabase(
        { path: this.#options.path, synchronous: this.#options.synchronous, damagedInUse },
        { logger: this.#logger, now: this.#now },
      );
      // Mid-run, #resetDisk counts the loss itself (it knows what the disk held before).
      if (salvage) this.#countSalvage(salvage, !damagedInUse);
      try {
        return new SpillStore(db);
      } catch (err: unknown) {
        // The handle is open: close it, or the file stays locked by a store nobody uses.
        db.close();
        throw err;
      }
    } catch (err: unknown) {
      this.#logger.error(
        { err, code: sqliteCode(err), path: this.#options.path },
        `spill database cannot be opened (${getErrorMessage(err)}): running memory-only, nothing survives a restart`,
      );
      return undefined;
    }
  }

  #closeStore(): void {
    const store = this.#store;
    this.#store = undefined;
    try {
      store?.close();
    } catch {
      // Closing a broken handle may fail too; nothing more can be done with it.
    }
  }

  // ---- accounting ----

  #forgetDiskRow(bytes: number): void {
    this.#diskRows--;
    this.#diskBytes -= bytes;
  }

  #countSalvage(report: SalvageReport, countLost: boolean): void {
    const items = report.tables['items'] ?? { recovered: 0, lost: 0 };
    this.#salvage.recovered += items.recovered;
    this.#salvage.lost += items.lost;
    this.#counters.salvaged?.(items.recovered, items.lost);
    if (countLost) this.#drop('disk_error', items.lost);
  }

  #countQuarantined(
    item: { id: string; kind: ItemKind; bytes: number },
    reason: QuarantineReason,
  ): void {
    this.#quarantined++;
    this.#drop('quarantined', 1);
    this.#logger.error(
      { id: item.id, kind: item.kind, bytes: item.bytes, reason },
      reason === 'checksum'
        ? 'spilled record failed its checksum: moved to quarantine, not sent'
        : 'record refused by the gateway: moved to quarantine, not sent again',
    );
  }

  /**
   * After a requeue: if the oldest returned item is also the oldest unsettled one, it is the
   * head of the queue coming back once more; count it (a new head starts at one).
   */
  #trackHead(): void {
    const first = this.#returned[0];
    if (!first) return;
    for (const held of this.#inflight.values()) if (held.seq < first.seq) return;
    if (this.#head?.seq === first.seq) {
      this.#head = { ...this.#head, returns: this.#head.returns + 1 };
    } else {
      this.#head = { seq: first.seq, id: first.id, returns: 1, since: this.#now() };
    }
  }

  #countSpilled(count: number): void {
    this.#spilled += count;
    this.#counters.spilled(count);
  }

  #drop(reason: DropReason, count: number): void {
    if (count <= 0) return;
    this.#dropped[reason] += count;
    this.#counters.dropped(reason, count);
  }

  #release(ids: readonly string[]): void {
    if (ids.length === 0) return;
    for (const listener of this.#releaseListeners) {
      try {
        listener(ids);
      } catch (err: unknown) {
        this.#logger.error({ err }, 'release listener failed');
      }
    }
  }

  #notify(): void {
    for (const wake of this.#waiters.splice(0)) wake();
  }
}
