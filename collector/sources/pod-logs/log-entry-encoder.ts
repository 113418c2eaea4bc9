// LogEntry, LogBatch and the AgentMessage around them, encoded by hand for the log path: it runs
// once per line, and the generated encoder spent a third of the collector's CPU there (per
// entry: every constant field and the labels map again, the timestamp parsed back from a
// decimal string, and one forked writer per nested message). Here a container's constant
// fields are encoded once, the timestamp goes from seconds + nanoseconds straight to a varint,
// and a plain-text line's bytes are written once and copied into `raw`.
//
// The bytes are exactly the generated encoder's (same field order, same defaults skipped):
// log-entry-encoder.test.ts checks that against proto/gen on generated inputs and on the
// golden fixture. Field numbers are proto/agent/v1/{agent,log}.proto and
// proto/common/v1/common.proto; a change there must change this file (buf breaking keeps them
// stable).
import { LogLevel, type LogEntry } from '../../../proto/index.js';
import type { LineTime } from './line-time.js';
import { ProtoWriter, splitNanos, varint32Size, varint64Size } from './proto-writer.js';

/** Fields every entry of one container carries. */
export type EntryBase = Omit<LogEntry, 'timestamp' | 'message' | 'level' | 'raw' | 'truncated'>;

/** The fields that differ per entry. */
export interface EntryFields {
  readonly time: LineTime;
  readonly message: string;
  readonly level: LogLevel;
  /** The application's text; UTF-8 encoded into the `raw` bytes field. */
  readonly raw: string;
  readonly truncated: boolean;
}

// Tags: field number << 3 | wire type (0 varint, 2 length-delimited).
const LOG_BATCH_ENTRIES = 0x0a;
const ENTRY_POD_NAME = 0x0a;
const ENTRY_NAMESPACE = 0x12;
const ENTRY_CONTAINER = 0x1a;
const ENTRY_TIMESTAMP = 0x20;
const ENTRY_MESSAGE = 0x2a;
const ENTRY_LEVEL = 0x30;
const ENTRY_LABELS = 0x3a;
const ENTRY_RAW = 0x42;
const ENTRY_WORKLOAD = 0x52;
const ENTRY_WORKLOAD_KIND = 0x5a;
const ENTRY_NODE_NAME = 0x62;
const ENTRY_TRUNCATED = 0x68;
const MAP_KEY = 0x0a;
const MAP_VALUE = 0x12;
const MESSAGE_ID = 0x0a;
const MESSAGE_META = 0x12;
const MESSAGE_LOGS = 0x22;
const META_CLUSTER_ID = 0x12;
const META_AGENT_ID = 0x1a;
const META_TIMESTAMP = 0x28;

/** The level as written: a LogLevel value (0-4), anything else UNSPECIFIED. */
const wireLevel = (level: LogLevel): LogLevel =>
  Number.isInteger(level) && level >= 0 && level <= 4 ? level : LogLevel.LOG_LEVEL_UNSPECIFIED;

/** A string field's bytes (tag, length, UTF-8), or nothing for "" as proto3 skips it. */
function stringFieldSize(value: string): number {
  if (value === '') return 0;
  const bytes = Buffer.byteLength(value, 'utf8');
  return 1 + varint32Size(bytes) + bytes;
}

function writeStringField(out: ProtoWriter, tag: number, value: string): void {
  if (value === '') return;
  const bytes = Buffer.byteLength(value, 'utf8');
  out.byte(tag);
  out.varint32(bytes);
  out.utf8(value, bytes);
}

/** Encodes constant fields into a right-sized buffer. */
function constantBytes(fields: readonly (readonly [number, string])[]): Buffer {
  const size = fields.reduce((sum, [, value]) => sum + stringFieldSize(value), 0);
  const out = new ProtoWriter(Math.max(1, size));
  for (const [tag, value] of fields) writeStringField(out, tag, value);
  return out.view();
}

function labelsBytes(labels: Readonly<Record<string, string>>): Buffer {
  // Object.entries order, as the generated encoder iterates the map.
  const pairs = Object.entries(labels);
  const sizes = pairs.map(([key, value]) => stringFieldSize(key) + stringFieldSize(value));
  const size = sizes.reduce((sum, s) => sum + 1 + varint32Size(s) + s, 0);
  const out = new ProtoWriter(Math.max(1, size));
  pairs.forEach(([key, value], i) => {
    out.byte(ENTRY_LABELS);
    out.varint32(sizes[i] ?? 0);
    writeStringField(out, MAP_KEY, key);
    writeStringField(out, MAP_VALUE, value);
  });
  return out.view();
}

/** Writes one container's entries; its constant fields are encoded once, here. */
export class LogEntryEncoder {
  /** pod_name, namespace, container (fields 1-3). */
  readonly #head: Buffer;
  /** labels (field 7). */
  readonly #labels: Buffer;
  /** workload, workload_kind, node_name (fields 10-12). */
  readonly #tail: Buffer;
  readonly #time = { lo: 0, hi: 0 };

  constructor(base: EntryBase) {
    this.#head = constantBytes([
      [ENTRY_POD_NAME, base.podName],
      [ENTRY_NAMESPACE, base.namespace],
      [ENTRY_CONTAINER, base.container],
    ]);
    this.#labels = labelsBytes(base.labels);
    this.#tail = constantBytes([
      [ENTRY_WORKLOAD, base.workload],
      [ENTRY_WORKLOAD_KIND, base.workloadKind],
      [ENTRY_NODE_NAME, base.nodeName],
    ]);
  }

  /** Appends one element of LogBatch.entries: its tag, its length, the LogEntry. */
  append(out: ProtoWriter, entry: EntryFields): void {
    const { message, raw, truncated } = entry;
    // Only the enum's values reach the wire: anything else (a bug upstream) would size and
    // write differently and corrupt the batch, so it becomes UNSPECIFIED.
    const level = wireLevel(entry.level);
    const timeSize = this.#splitTime(entry.time);
    const messageBytes = message === '' ? 0 : Buffer.byteLength(message, 'utf8');
    // A plain-text line's message is its raw text (the same string): its bytes are copied.
    const sameText = raw === message;
    const rawBytes = sameText ? messageBytes : raw === '' ? 0 : Buffer.byteLength(raw, 'utf8');
    const smallFields =
      timeSize + (level === 0 ? 0 : 1 + varint32Size(level)) + (truncated ? 2 : 0);
    const length = this.#entryLength(smallFields, messageBytes, rawBytes);
    out.reserve(1 + varint32Size(length) + length);
    out.byte(LOG_BATCH_ENTRIES);
    out.varint32(length);
    out.bytes(this.#head);
    if (timeSize > 0) {
      out.byte(ENTRY_TIMESTAMP);
      out.varint64(this.#time.lo, this.#time.hi);
    }
    let messageStart = -1;
    if (messageBytes > 0) {
      out.byte(ENTRY_MESSAGE);
      out.varint32(messageBytes);
      messageStart = out.length;
      out.utf8(message, messageBytes);
    }
    if (level !== 0) {
      out.byte(ENTRY_LEVEL);
      out.varint32(level);
    }
    out.bytes(this.#labels);
    if (rawBytes > 0) {
      out.byte(ENTRY_RAW);
      out.varint32(rawBytes);
      if (sameText) out.repeat(messageStart, messageStart + messageBytes);
      else out.utf8(raw, rawBytes);
    }
    out.bytes(this.#tail);
    if (truncated) {
      out.byte(ENTRY_TRUNCATED);
      out.byte(1);
    }
  }

  /** The LogEntry's encoded size: the constants, the small fields, message and raw. */
  #entryLength(smallFields: number, messageBytes: number, rawBytes: number): number {
    return (
      this.#head.length +
      smallFields +
      (messageBytes === 0 ? 0 : 1 + varint32Size(messageBytes) + messageBytes) +
      this.#labels.length +
      (rawBytes === 0 ? 0 : 1 + varint32Size(rawBytes) + rawBytes) +
      this.#tail.length
    );
  }

  /** Splits the time into #time; returns the timestamp field's size (0: the default, skipped). */
  #splitTime(time: LineTime): number {
    if (time.sec === 0 && time.nanos === 0) return 0;
    if (time.sec > 0) {
      splitNanos(time.sec, time.nanos, this.#time);
    } else {
      // Before 1970: an int64 below zero is a ten-byte two's complement varint. Never seen from a
      // runtime, so BigInt is fine here.
      const value = BigInt.asUintN(64, BigInt(time.sec) * 1_000_000_000n + BigInt(time.nanos));
      this.#time.lo = Number(value & 0xffffffffn);
      this.#time.hi = Number(value >> 32n);
    }
    return 1 + varint64Size(this.#time.lo, this.#time.hi);
  }
}

/** The AgentMessage fields around a batch of log entries. */
export interface LogMessageEnvelope {
  readonly messageId: string;
  readonly clusterId: string;
  readonly agentId: string;
  /** AgentMetadata.timestamp: unix milliseconds. */
  readonly timestampMs: number;
}

/**
 * The AgentMessage `{message_id, meta, logs}` whose LogBatch body is `entries` (the
 * concatenation of LogEntryEncoder.append outputs), in one right-sized buffer.
 */
export function encodeLogMessage(envelope: LogMessageEnvelope, entries: Uint8Array): Uint8Array {
  const { messageId, clusterId, agentId, timestampMs } = envelope;
  const timeLo = timestampMs % 4294967296;
  const timeHi = Math.floor(timestampMs / 4294967296);
  const metaSize =
    stringFieldSize(clusterId) +
    stringFieldSize(agentId) +
    (timestampMs === 0 ? 0 : 1 + varint64Size(timeLo, timeHi));
  const size =
    stringFieldSize(messageId) +
    (1 + varint32Size(metaSize) + metaSize) +
    (1 + varint32Size(entries.length) + entries.length);
  // Unpooled: the message may sit in the buffer's memory tier for long, and a pooled slice
  // would keep a whole shared slab alive beyond what the tier accounts for.
  const out = new ProtoWriter(size, { pooled: false });
  writeStringField(out, MESSAGE_ID, messageId);
  out.byte(MESSAGE_META);
  out.varint32(metaSize);
  writeStringField(out, META_CLUSTER_ID, clusterId);
  writeStringField(out, META_AGENT_ID, agentId);
  if (timestampMs !== 0) {
    out.byte(META_TIMESTAMP);
    out.varint64(timeLo, timeHi);
  }
  out.byte(MESSAGE_LOGS);
  out.varint32(entries.length);
  out.bytes(entries);
  return out.view();
}
