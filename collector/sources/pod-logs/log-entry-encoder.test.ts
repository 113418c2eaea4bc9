// The hand encoder must produce exactly the generated encoder's bytes: checked on the golden
// fixture the wire tests pin, and on a few thousand generated entries that reach every branch
// (empty and non-ASCII strings, maps, levels, timestamps from before 1970 to 2242).
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { AgentMessage, LogLevel, type LogEntry } from '../../../proto/index.js';
import {
  encodeLogMessage,
  LogEntryEncoder,
  type EntryBase,
  type EntryFields,
} from './log-entry-encoder.js';
import { ProtoWriter, splitNanos, varint64Size } from './proto-writer.js';

const goldenDir = join(
  dirname(fileURLToPath(import.meta.url)),
  '..',
  '..',
  '..',
  'test',
  'fixtures',
  'golden',
);

/** The same message through the generated code, from the same inputs. */
function generated(
  envelope: { messageId: string; clusterId: string; agentId: string; timestampMs: number },
  base: EntryBase,
  entries: readonly EntryFields[],
): Buffer {
  const toEntry = (e: EntryFields): LogEntry => ({
    ...base,
    timestamp: (BigInt(e.time.sec) * 1_000_000_000n + BigInt(e.time.nanos)).toString(),
    message: e.message,
    level: e.level,
    raw: Buffer.from(e.raw, 'utf8'),
    truncated: e.truncated,
  });
  return Buffer.from(
    AgentMessage.encode({
      messageId: envelope.messageId,
      meta: {
        tenantId: '',
        clusterId: envelope.clusterId,
        agentId: envelope.agentId,
        sessionId: '',
        timestamp: String(envelope.timestampMs),
      },
      payload: { $case: 'logs', value: { entries: entries.map(toEntry) } },
    }).finish(),
  );
}

function handEncoded(
  envelope: { messageId: string; clusterId: string; agentId: string; timestampMs: number },
  base: EntryBase,
  entries: readonly EntryFields[],
  writer = new ProtoWriter(8),
): Buffer {
  const encoder = new LogEntryEncoder(base);
  for (const entry of entries) encoder.append(writer, entry);
  return Buffer.from(encodeLogMessage(envelope, writer.view()));
}

/** A small deterministic PRNG (mulberry32): the same cases every run. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const PIECES = ['', 'a', 'web-0', 'ü', '日本語', '😀', 'x'.repeat(200), 'line\twith tab', '"q"'];

describe('LogEntryEncoder', () => {
  it('reproduces the golden agent-logs fixture byte for byte', () => {
    const fixture = readFileSync(join(goldenDir, 'agent-logs.hex'), 'utf8').trim();
    const bytes = handEncoded(
      { messageId: 'm-2', clusterId: 'c-uid', agentId: 'a-1', timestampMs: 1_700_000_000_000 },
      {
        podName: 'web-0',
        namespace: 'shop',
        container: 'app',
        labels: { app: 'web' },
        workload: 'web',
        workloadKind: 'StatefulSet',
        nodeName: 'node-1',
      },
      [
        {
          time: { sec: 1_700_000_000, nanos: 123_456_789 },
          message: 'hello',
          level: LogLevel.LOG_LEVEL_WARN,
          raw: '{"msg":"hello"}',
          truncated: true,
        },
      ],
    );
    expect(bytes.toString('hex')).toBe(fixture);
  });

  it('matches the generated encoder on 3,000 generated batches', () => {
    const next = random(42);
    const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)] as T;
    const text = (): string =>
      Array.from({ length: Math.floor(next() * 4) }, () => pick(PIECES)).join('');
    const times = [
      { sec: 0, nanos: 0 },
      { sec: 0, nanos: 1 },
      { sec: 1, nanos: 0 },
      { sec: -1, nanos: 500 },
      { sec: 1_767_225_600, nanos: 999_999_999 },
      { sec: 2 ** 33 - 1, nanos: 999_999_999 },
    ];
    let writer = new ProtoWriter(8);
    for (let round = 0; round < 3000; round++) {
      const base: EntryBase = {
        podName: text(),
        namespace: text(),
        container: text(),
        labels: Object.fromEntries(
          Array.from({ length: Math.floor(next() * 3) }, (_, i) => [
            i === 0 ? text() : `k${String(i)}`,
            text(),
          ]),
        ),
        workload: text(),
        workloadKind: pick(['', 'Deployment', 'CronJob']),
        nodeName: text(),
      };
      const entries = Array.from({ length: 1 + Math.floor(next() * 4) }, (): EntryFields => {
        const raw = text();
        const time =
          next() < 0.3
            ? pick(times)
            : { sec: Math.floor(next() * 2 ** 33), nanos: Math.floor(next() * 1e9) };
        return {
          time,
          raw,
          // Usually the very same string (plain text), sometimes a JSON line's own message.
          message: next() < 0.6 ? raw : text(),
          level: pick([0, 1, 2, 3, 4]),
          truncated: next() < 0.2,
        };
      });
      const envelope = {
        messageId: text(),
        clusterId: text(),
        agentId: text(),
        timestampMs: pick([0, 1, 1_767_225_600_123, 2 ** 52]),
      };
      // A writer reused across batches, as a container's is.
      if (round % 7 === 0) writer = new ProtoWriter(8);
      writer.reset(64);
      expect(handEncoded(envelope, base, entries, writer).toString('hex')).toBe(
        generated(envelope, base, entries).toString('hex'),
      );
    }
  });
});

describe('LogEntryEncoder, values outside the enum', () => {
  it('writes a level outside LogLevel as UNSPECIFIED, never a wrong length', () => {
    const base: EntryBase = {
      podName: 'p',
      namespace: 'n',
      container: 'c',
      labels: {},
      workload: '',
      workloadKind: '',
      nodeName: '',
    };
    const entry = (level: number): EntryFields => ({
      time: { sec: 1, nanos: 2 },
      message: 'm',
      level: level as LogLevel,
      raw: 'm',
      truncated: false,
    });
    const envelope = { messageId: 'id', clusterId: 'c', agentId: 'a', timestampMs: 1 };
    const expected = generated(envelope, base, [entry(0), entry(0)]).toString('hex');
    for (const bad of [-1, 5, 99, 1.5, Number.NaN]) {
      expect(handEncoded(envelope, base, [entry(bad), entry(bad)]).toString('hex')).toBe(expected);
    }
  });
});

describe('proto writer', () => {
  it('splits unix nanoseconds into exact 32-bit halves across the range', () => {
    const next = random(7);
    const out = { lo: 0, hi: 0 };
    const secs = [0, 1, 65535, 65536, 1_767_225_600, 2 ** 32, 2 ** 33 - 1];
    for (let i = 0; i < 5000; i++) {
      const sec = i < secs.length ? (secs[i] ?? 0) : Math.floor(next() * 2 ** 33);
      const nanos = i % 3 === 0 ? 999_999_999 : Math.floor(next() * 1e9);
      splitNanos(sec, nanos, out);
      const value = BigInt(sec) * 1_000_000_000n + BigInt(nanos);
      expect([out.lo, out.hi]).toEqual([Number(value & 0xffffffffn), Number(value >> 32n)]);
    }
  });

  it('sizes every varint64 as it writes it', () => {
    const writer = new ProtoWriter(16);
    for (let bits = 0; bits <= 64; bits++) {
      const value = bits === 0 ? 0n : (1n << BigInt(bits)) - 1n;
      const lo = Number(value & 0xffffffffn);
      const hi = Number(value >> 32n);
      writer.reset(16);
      writer.reserve(10);
      writer.varint64(lo, hi);
      expect(writer.length, `${String(bits)} bits`).toBe(varint64Size(lo, hi));
    }
  });

  it('grows past its capacity and keeps what was written', () => {
    const writer = new ProtoWriter(4);
    const text = 'ü'.repeat(1000);
    writer.reserve(2000);
    writer.utf8(text, 2000);
    writer.reserve(10);
    writer.varint32(300);
    expect(writer.view().subarray(0, 2000).toString('utf8')).toBe(text);
    expect([...writer.view().subarray(2000)]).toEqual([0xac, 0x02]);
    writer.reset(64);
    expect(writer.capacity).toBe(64);
  });
});
