// One container instance's path from lines to batches: positions, resume skipping, joining,
// limits, batch cutting at the same boundaries after a crash (intents), and the release
// bookkeeping that moves its checkpoint only over batches the buffer has released.
import { createHash } from 'node:crypto';
import { Joiner, type LinePosition, type LogRecord } from './joiner.js';
import { compareLineTime, lineTimeToMs, lineTimeToNs, type LineTime } from './line-time.js';
import { parseLine } from './parse-line.js';
import { LogEntryEncoder, type EntryBase } from './log-entry-encoder.js';
import { ProtoWriter } from './proto-writer.js';
import { TokenBucket, type RateLimit } from './rate-limiter.js';
import type { ContainerInstance, Intent, SavedCheckpoint } from './checkpoint-store.js';

/** Limits from the gateway's ingest rules (0 = off), as the Go agent applies them. */
export interface IngestLimits {
  readonly maxLineBytes: number;
  readonly maxSampleAgeMs: number;
  readonly maxFutureSkewMs: number;
  readonly rate: RateLimit;
}

export const DEFAULT_INGEST_LIMITS: IngestLimits = {
  maxLineBytes: 262_144,
  maxSampleAgeMs: 0,
  maxFutureSkewMs: 0,
  rate: { ratePerSecond: 0, burst: 0 },
};

export type DropReason = 'rate_limited' | 'too_old' | 'future';

export type { EntryBase } from './log-entry-encoder.js';

export interface ContainerLogOptions {
  readonly instance: ContainerInstance;
  readonly base: EntryBase;
  readonly saved: SavedCheckpoint;
  readonly limits: IngestLimits;
  readonly maxBatchEntries: number;
  readonly maxBatchBytes: number;
  readonly nowMs: number;
  readonly onDrop: (reason: DropReason) => void;
  /** A line was cut to max_line_bytes (or by the reader); counted once, when first read. */
  readonly onTruncated?: () => void;
}

/** A batch ready to enqueue (only batches with at least one entry are). */
export interface CutBatch {
  readonly messageId: string;
  readonly end: LinePosition;
  /** The encoded LogBatch body: `entryCount` LogBatch.entries elements (log-entry-encoder.ts). */
  readonly entries: Uint8Array;
  readonly entryCount: number;
  /** The first entry's time, unix ms (AgentMetadata.timestamp); 0 if it has none. */
  readonly firstTimeMs: number;
}

/** A batch's writer keeps at most this much room between batches; more goes back to the GC. */
const KEPT_WRITER_BYTES = 64 * 1024;
const INITIAL_WRITER_BYTES = 16 * 1024;

interface Outstanding {
  readonly messageId: string;
  readonly end: LinePosition;
  released: boolean;
}

export function comparePosition(a: LinePosition, b: LinePosition): number {
  return compareLineTime(a, b) || a.count - b.count;
}

const positionKey = (p: LinePosition | undefined): string =>
  p ? `${lineTimeToNs(p)}.${String(p.count)}` : 'start';

/** A uuid-shaped (version 8) id derived from the instance and the batch's line range. */
export function batchMessageId(instance: ContainerInstance, from: string, to: string): string {
  const hex = createHash('sha256')
    .update(
      `${instance.podUid}\0${instance.container}\0${String(instance.restartCount)}\0${from}\0${to}`,
    )
    .digest('hex');
  const variant = ((parseInt(hex.charAt(16), 16) & 0x3) | 0x8).toString(16);
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-8${hex.slice(13, 16)}-${variant}${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
}

export class ContainerLog {
  readonly instance: ContainerInstance;
  #options: ContainerLogOptions;
  readonly #joiner = new Joiner();
  #bucket: TokenBucket | undefined;
  /** Last line read on the current connection, for numbering equal timestamps. */
  #last: LinePosition | undefined;
  /** Lines the current connection skipped as already delivered. */
  #skipped = 0;
  /** Lines at or before this position were already delivered: skipped. */
  #skipThrough: LinePosition | undefined;
  /** Last line processed (delivered, dropped or pending in the joiner). */
  #readThrough: LinePosition | undefined;
  /** Batches cut before a crash and not released: cut again at the same ends, same ids. */
  readonly #planned: Intent[];
  readonly #encoder: LogEntryEncoder;
  /** The current batch's encoded entries; created on its first entry. */
  #writer: ProtoWriter | undefined;
  #entryCount = 0;
  /** The current batch's first entry time (unix ms). */
  #firstTimeMs = 0;
  /** End of the last record put into (or dropped from) the current batch. */
  #batchEnd: LinePosition | undefined;
  /** End of the previous batch: the start of the current one. */
  #batchStart: LinePosition | undefined;
  readonly #ready: CutBatch[] = [];
  readonly #outstanding: Outstanding[] = [];

  constructor(options: ContainerLogOptions) {
    this.#options = options;
    this.instance = options.instance;
    this.#skipThrough = options.saved.position;
    this.#readThrough = options.saved.position;
    this.#batchStart = options.saved.position;
    this.#planned = [...options.saved.intents];
    this.#encoder = new LogEntryEncoder(options.base);
    this.#bucket = TokenBucket.isUnlimited(options.limits.rate)
      ? undefined
      : new TokenBucket(options.limits.rate, options.nowMs);
  }

  /**
   * Applies new ingest limits (a gateway ConfigUpdate) from the next line on. A changed rate
   * starts a full bucket, as a new stream would.
   */
  setLimits(limits: IngestLimits, nowMs: number): void {
    const rateChanged =
      limits.rate.ratePerSecond !== this.#options.limits.rate.ratePerSecond ||
      limits.rate.burst !== this.#options.limits.rate.burst;
    this.#options = { ...this.#options, limits };
    if (rateChanged) {
      this.#bucket = TokenBucket.isUnlimited(limits.rate)
        ? undefined
        : new TokenBucket(limits.rate, nowMs);
    }
  }

  /** Where a new connection resumes: after this position (undefined: nothing read yet). */
  resumeAfter(): LinePosition | undefined {
    return this.#readThrough;
  }

  /** Starts a new connection: positions are numbered afresh from what it returns. */
  beginConnection(): void {
    this.#last = undefined;
    this.#skipped = 0;
    this.#skipThrough = this.#readThrough;
  }

  /** The last line the current (or last) connection saw, skipped ones included. */
  lastSeen(): LinePosition | undefined {
    return this.#last;
  }

  /** How many lines the current (or last) connection skipped as already delivered. */
  skippedOnConnection(): number {
    return this.#skipped;
  }

  /**
   * Moves the read position back to `to`: the next connection delivers the lines after it.
   * Only for lines known not to have been delivered, those of a connection that read the next
   * instance's log under this one's identity (see restart.ts). The checkpoint never moves back.
   */
  rewind(to: LinePosition): void {
    this.#readThrough = to;
  }

  /** One line of the connection (without its newline); `cut` if the reader dropped bytes. */
  accept(text: string, cut: boolean, nowMs: number): void {
    const line = parseLine(text, this.#options.limits.maxLineBytes, cut);
    const position = this.#number(line.time);
    if (this.#skipThrough && comparePosition(position, this.#skipThrough) <= 0) {
      this.#skipped++;
      return;
    }
    if (line.truncated) this.#options.onTruncated?.();
    this.#readThrough = position;
    this.#cutPlannedBefore(position);
    if (line.raw === '' && !line.truncated) {
      // A blank line joins no record's text, but a pending record spans it: the batch that
      // holds the record holds the blank line too, so no batch can end between them.
      if (!this.#joiner.absorbBlank(position)) this.#extendBatchEnd(position);
    } else {
      const done = this.#joiner.add({ line, time: position, position, readAtMs: nowMs });
      if (done) this.#record(done, nowMs);
    }
    const planned = this.#planned[0];
    if (planned && comparePosition(position, planned.end) === 0) {
      this.#planned.shift();
      this.#flushJoiner(nowMs);
      this.#cut(planned.messageId, planned.end);
    }
  }

  /**
   * The log has no more lines (a finished instance read to its end): batches replayed from
   * intents whose end the read did not reach are cut now, under their ids, with what it held.
   */
  endOfLog(nowMs: number): void {
    this.#flushJoiner(nowMs);
    for (const planned of this.#planned.splice(0)) this.#cut(planned.messageId, planned.end);
  }

  /** At the end of a connection, or when a record waited long enough: emit the pending record. */
  flushJoiner(nowMs: number, idleOnly: boolean): void {
    const done = idleOnly ? this.#joiner.flushIdle(nowMs) : this.#joiner.flush();
    if (done) this.#record(done, nowMs);
  }

  /**
   * Returns and clears every ready batch; with `cutPartial`, the current one is cut first, unless
   * it is a replayed batch (an intent from before a crash): its end and id are pinned, so it is
   * cut only when the read reaches that end (or the log ends), whatever the flush timing.
   */
  takeBatches(cutPartial = true): CutBatch[] {
    if (cutPartial && this.#batchEnd && this.#planned.length === 0) {
      this.#cut(undefined);
      // A batch cut short by the clock, not by its size: this container writes slowly, so its
      // writer goes back to the GC rather than idle beside thousands of others.
      this.#writer = undefined;
    }
    return this.#ready.splice(0);
  }

  hasFullBatch(): boolean {
    return this.#ready.length > 0;
  }

  /**
   * Whether an idle flush has anything to do here: a record the joiner holds (emitted once it
   * waited its hold time), a partial batch it would cut (not one replayed from an intent: that
   * one waits for its end line), a batch cut and not taken, or a released batch at the head of
   * the outstanding ones (its checkpoint moves at the next settle). Batches enqueued and not
   * released are not pending: their release is an event of its own.
   */
  hasPending(): boolean {
    return (
      this.#joiner.holds() ||
      (this.#batchEnd !== undefined && this.#planned.length === 0) ||
      this.#ready.length > 0 ||
      this.#outstanding[0]?.released === true
    );
  }

  /** Marks a batch of this instance released; false if the id is not one of ours. */
  markReleased(messageId: string): boolean {
    const item = this.#outstanding.find((o) => o.messageId === messageId);
    if (!item) return false;
    item.released = true;
    return true;
  }

  /** Pops the released prefix: the new checkpoint and the intents to forget, if it moved. */
  settle(): { position: LinePosition; released: string[] } | undefined {
    const released: string[] = [];
    let position: LinePosition | undefined;
    while (this.#outstanding[0]?.released) {
      const done = this.#outstanding.shift();
      if (!done) break;
      released.push(done.messageId);
      position = done.end;
    }
    return position ? { position, released } : undefined;
  }

  /** Batches cut and not yet released (checkpoint lag, in batches). */
  outstanding(): number {
    return this.#outstanding.length;
  }

  #number(time: LineTime | undefined): LinePosition {
    const last = this.#last;
    let position: LinePosition;
    if (last && (!time || compareLineTime(time, last) <= 0)) {
      // Equal timestamp (or a line without one, or a clock step back): the next ordinal.
      position = { sec: last.sec, nanos: last.nanos, count: last.count + 1 };
    } else {
      const at = time ?? { sec: 0, nanos: 0 };
      position = { sec: at.sec, nanos: at.nanos, count: 1 };
    }
    this.#last = position;
    return position;
  }

  /** A replayed batch boundary lies before this line: close the batch there. */
  #cutPlannedBefore(position: LinePosition): void {
    const planned = this.#planned[0];
    if (!planned || comparePosition(position, planned.end) <= 0) return;
    this.#flushJoiner(0);
    this.#cut(this.#planned.shift()?.messageId, planned.end);
  }

  #flushJoiner(nowMs: number): void {
    const done = this.#joiner.flush();
    if (done) this.#record(done, nowMs);
  }

  #record(record: LogRecord, nowMs: number): void {
    const reason = this.#refusal(record, nowMs);
    if (reason) this.#options.onDrop(reason);
    else this.#add(record);
    this.#extendBatchEnd(record.end);
    const { maxBatchEntries, maxBatchBytes } = this.#options;
    const full =
      this.#entryCount >= maxBatchEntries || (this.#writer?.length ?? 0) >= maxBatchBytes;
    if (full && this.#planned.length === 0) this.#cut(undefined);
  }

  #refusal(record: LogRecord, nowMs: number): DropReason | undefined {
    const { maxSampleAgeMs, maxFutureSkewMs } = this.#options.limits;
    const atMs = lineTimeToMs(record.time);
    if (maxSampleAgeMs > 0 && nowMs > 0 && nowMs - atMs > maxSampleAgeMs) return 'too_old';
    if (maxFutureSkewMs > 0 && nowMs > 0 && atMs - nowMs > maxFutureSkewMs) return 'future';
    if (this.#bucket && !this.#bucket.tryTake(Buffer.byteLength(record.raw), nowMs)) {
      return 'rate_limited';
    }
    return undefined;
  }

  #add(record: LogRecord): void {
    this.#writer ??= new ProtoWriter(INITIAL_WRITER_BYTES);
    this.#encoder.append(this.#writer, record);
    if (this.#entryCount === 0) this.#firstTimeMs = Math.max(0, lineTimeToMs(record.time));
    this.#entryCount++;
  }

  #extendBatchEnd(position: LinePosition): void {
    if (!this.#batchEnd || comparePosition(position, this.#batchEnd) > 0) this.#batchEnd = position;
  }

  #cut(plannedId: string | undefined, plannedEnd?: LinePosition): void {
    const end = plannedEnd ?? this.#batchEnd;
    if (!end) return;
    const messageId =
      plannedId ?? batchMessageId(this.instance, positionKey(this.#batchStart), positionKey(end));
    const entryCount = this.#entryCount;
    this.#batchStart = end;
    this.#batchEnd = undefined;
    this.#outstanding.push({ messageId, end, released: entryCount === 0 });
    if (entryCount > 0 && this.#writer) {
      this.#ready.push({
        messageId,
        end,
        entries: Buffer.from(this.#writer.view()),
        entryCount,
        firstTimeMs: this.#firstTimeMs,
      });
      this.#entryCount = 0;
      this.#writer.reset(KEPT_WRITER_BYTES);
    }
  }
}
