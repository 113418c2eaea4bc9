// Multi-line joining: stack traces (Java, Python, Go, Node) become one record. A JSON line is
// never joined, neither as the start of a record nor as a continuation.
import type { LogLevel } from '../../../proto/index.js';
import type { LineTime } from './line-time.js';
import type { ParsedLine } from './parse-line.js';

/**
 * Where a line sits in its container's log: its runtime timestamp and its ordinal (1-based)
 * among the lines carrying exactly that timestamp. Strictly increasing along a log.
 */
export interface LinePosition {
  readonly sec: number;
  readonly nanos: number;
  readonly count: number;
}

/** A parsed line with its position and the wall-clock time it was read. */
export interface PositionedLine {
  readonly line: ParsedLine;
  readonly time: LineTime;
  readonly position: LinePosition;
  readonly readAtMs: number;
}

/** One or more joined lines: the first line's time, level and message; every line's raw text. */
export interface LogRecord {
  readonly time: LineTime;
  readonly raw: string;
  readonly message: string;
  readonly level: LogLevel;
  readonly truncated: boolean;
  readonly lines: number;
  /** Position of the record's last line: the checkpoint moves here once it is delivered. */
  readonly end: LinePosition;
}

export interface JoinerOptions {
  /** A record is not extended beyond this many UTF-8 bytes of raw text (Go agent: 64 KiB). */
  readonly maxRecordBytes: number;
  /** Lines more than this much later (by runtime timestamp) than the record's start begin a new one. */
  readonly holdMs: number;
}

export const DEFAULT_JOINER_OPTIONS: JoinerOptions = { maxRecordBytes: 64 * 1024, holdMs: 2_000 };

interface Pending {
  first: PositionedLine;
  /** Raw text of the lines after the first; undefined until one joins (most records are one line). */
  more: string[] | undefined;
  bytes: number;
  truncated: boolean;
  end: LinePosition;
  lastReadAtMs: number;
  lastIndented: boolean;
  goStack: boolean;
  pythonTrace: boolean;
}

const ALWAYS_CONTINUES = ['Caused by:', '... ', 'goroutine ', 'created by '];
const GO_FRAME = /^[\w./*()[\]-]+\(.*\)$/;
const PYTHON_EXCEPTION = /^[\w.]+(?:Error|Exception|Exit|Interrupt|Warning)\b/;

/** One joiner per container stream. */
export class Joiner {
  readonly #options: JoinerOptions;
  #pending: Pending | undefined;

  constructor(options: JoinerOptions = DEFAULT_JOINER_OPTIONS) {
    this.#options = options;
  }

  /** Adds a line; returns the record it completed, if any. */
  add(next: PositionedLine): LogRecord | undefined {
    const pending = this.#pending;
    if (pending && this.#continues(pending, next)) {
      const raw = next.line.raw;
      if (pending.more) pending.more.push(raw);
      else pending.more = [raw];
      pending.bytes += 1 + Buffer.byteLength(raw);
      pending.truncated ||= next.line.truncated;
      pending.end = next.position;
      pending.lastReadAtMs = next.readAtMs;
      pending.lastIndented = isIndented(raw);
      pending.goStack ||= raw.startsWith('goroutine ');
      return undefined;
    }
    const done = this.flush();
    this.#pending = {
      first: next,
      more: undefined,
      bytes: next.line.raw.length,
      truncated: next.line.truncated,
      end: next.position,
      lastReadAtMs: next.readAtMs,
      lastIndented: false,
      goStack: next.line.raw.startsWith('goroutine '),
      pythonTrace: next.line.raw.startsWith('Traceback (most recent call last)'),
    };
    return done;
  }

  /** Emits the pending record (at stream end, or at a forced boundary). Idempotent. */
  flush(): LogRecord | undefined {
    const pending = this.#pending;
    if (!pending) return undefined;
    this.#pending = undefined;
    const { line, time } = pending.first;
    const more = pending.more;
    const joined = more ? `${line.raw}\n${more.join('\n')}` : undefined;
    return {
      time,
      raw: joined ?? line.raw,
      message: joined ?? line.message,
      level: line.level,
      truncated: pending.truncated,
      lines: more ? more.length + 1 : 1,
      end: pending.end,
    };
  }

  /**
   * A blank line while a record is pending: the record spans it (its text does not), so the
   * record and the blank line go into the same batch and a checkpoint never lands between them.
   * False when no record is pending.
   */
  absorbBlank(position: LinePosition): boolean {
    if (!this.#pending) return false;
    this.#pending.end = position;
    return true;
  }

  /** A record is pending: the next line, or `holdMs` of wall-clock time without one, emits it. */
  holds(): boolean {
    return this.#pending !== undefined;
  }

  /** Emits the pending record if no line was added to it for `holdMs` of wall-clock time. */
  flushIdle(nowMs: number): LogRecord | undefined {
    if (!this.#pending || nowMs - this.#pending.lastReadAtMs < this.#options.holdMs)
      return undefined;
    return this.flush();
  }

  #continues(pending: Pending, next: PositionedLine): boolean {
    const raw = next.line.raw;
    if (raw === '' || next.line.isJson || pending.first.line.isJson) return false;
    const firstTime = pending.first.time;
    const ageMs =
      (next.time.sec - firstTime.sec) * 1000 + (next.time.nanos - firstTime.nanos) / 1e6;
    if (ageMs > this.#options.holdMs) return false;
    if (pending.bytes + 1 + raw.length > this.#options.maxRecordBytes) return false;
    return isContinuationText(pending, raw);
  }
}

function isIndented(raw: string): boolean {
  const c = raw.charCodeAt(0);
  return c === 32 || c === 9;
}

function isContinuationText(pending: Pending, raw: string): boolean {
  if (isIndented(raw)) return true;
  if (ALWAYS_CONTINUES.some((prefix) => raw.startsWith(prefix))) return true;
  if (pending.goStack && GO_FRAME.test(raw)) return true;
  return pending.pythonTrace && pending.lastIndented && PYTHON_EXCEPTION.test(raw);
}
