// Buffer spill and replay of 200-byte items, each beside bare better-sqlite3 doing the least it
// could do for the same job on the same machine, in the same run: one unmeasured warm-up round
// of each, then ROUNDS rounds alternating baseline and buffer, median of each.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import Database from 'better-sqlite3';
import { pino } from 'pino';
import { DurableBuffer } from '../../collector/buffer/durable-buffer.js';
import type { BufferItem } from '../../collector/buffer/types.js';
import { median, rate, type BenchCase, type BenchContext, type BenchResult } from '../types.js';

const ITEMS = 200_000;
const WARMUP_ITEMS = 20_000;
const ROUNDS = 3;
const PAYLOAD_BYTES = 200;
const BATCH = 500;

function items(count: number): BufferItem[] {
  const payload = Buffer.alloc(PAYLOAD_BYTES, 0x61);
  return Array.from({ length: count }, (_, i) => ({
    id: `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`,
    kind: 'log' as const,
    payload,
  }));
}

function openBuffer(path: string): DurableBuffer {
  // 1 MiB of memory: all but the newest ~4k of the 200k items go through SQLite.
  return new DurableBuffer(
    { path, maxMemoryBytes: 1024 * 1024, maxDiskBytes: 1024 * 1024 * 1024 },
    { logger: pino({ level: 'silent' }) },
  );
}

async function measureBuffer(dir: string, input: readonly BufferItem[]) {
  const path = join(dir, 'buffer.db');
  const writer = openBuffer(path);
  let start = performance.now();
  for (const item of input) writer.enqueue(item);
  const spillMs = performance.now() - start;
  const spilled = writer.stats().spilled;
  await writer.close();

  const reader = openBuffer(path);
  start = performance.now();
  let replayed = 0;
  for (let batch = reader.take(BATCH); batch.length > 0; batch = reader.take(BATCH)) {
    replayed += batch.length;
  }
  const takeMs = performance.now() - start;
  await reader.close();

  // Replay as the stream drains it: take a batch, ack it (one delete transaction per batch).
  const drainer = openBuffer(path);
  start = performance.now();
  let drained = 0;
  for (let batch = drainer.take(BATCH); batch.length > 0; batch = drainer.take(BATCH)) {
    drainer.ack(batch.map((i) => i.id));
    drained += batch.length;
  }
  const drainMs = performance.now() - start;
  await drainer.close();
  return {
    // Conservative: only items that reached SQLite count, over the whole enqueue loop's time.
    spill: rate(spilled, spillMs),
    take: rate(replayed, takeMs),
    drain: rate(drained, drainMs),
  };
}

function measureBaseline(dir: string, input: readonly BufferItem[]) {
  const db = new Database(join(dir, 'baseline.db'));
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.exec('CREATE TABLE t (seq INTEGER PRIMARY KEY, id TEXT NOT NULL, payload BLOB NOT NULL)');
  const insert = db.prepare<[number, string, Uint8Array]>('INSERT INTO t VALUES (?, ?, ?)');
  const insertAll = db.transaction(() => {
    input.forEach((item, i) => insert.run(i + 1, item.id, item.payload));
  });
  let start = performance.now();
  insertAll();
  const insertMs = performance.now() - start;

  start = performance.now();
  let read = 0;
  for (const row of db
    .prepare<[], { payload: Buffer }>('SELECT seq, id, payload FROM t ORDER BY seq')
    .iterate()) {
    read += row.payload.length > 0 ? 1 : 0;
  }
  const selectMs = performance.now() - start;
  db.close();
  return { insert: rate(input.length, insertMs), select: rate(read, selectMs) };
}

export const bufferBench: BenchCase = {
  name: 'buffer',
  async run({ dir }: BenchContext): Promise<BenchResult[]> {
    const round = (name: string): string => {
      const path = join(dir, name);
      mkdirSync(path);
      return path;
    };
    const warmup = items(WARMUP_ITEMS);
    measureBaseline(round('warmup-baseline'), warmup);
    await measureBuffer(round('warmup-buffer'), warmup);
    const input = items(ITEMS);
    const baselines: ReturnType<typeof measureBaseline>[] = [];
    const buffers: Awaited<ReturnType<typeof measureBuffer>>[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      baselines.push(measureBaseline(round(`baseline-${String(r)}`), input));
      buffers.push(await measureBuffer(round(`buffer-${String(r)}`), input));
    }
    const insertBaseline = 'bare inserts, one transaction';
    const selectBaseline = 'bare SELECT ORDER BY seq';
    const insertRate = median(baselines.map((b) => b.insert));
    const selectRate = median(baselines.map((b) => b.select));
    return [
      {
        name: 'buffer spill (items written to SQLite)',
        itemsPerSecond: median(buffers.map((b) => b.spill)),
        baselineName: insertBaseline,
        baselineItemsPerSecond: insertRate,
        targetItemsPerSecond: 50_000,
      },
      {
        name: 'buffer replay (take after restart)',
        itemsPerSecond: median(buffers.map((b) => b.take)),
        baselineName: selectBaseline,
        baselineItemsPerSecond: selectRate,
        targetItemsPerSecond: 100_000,
      },
      {
        name: 'buffer replay + ack (drain)',
        itemsPerSecond: median(buffers.map((b) => b.drain)),
        baselineName: selectBaseline,
        baselineItemsPerSecond: selectRate,
      },
    ];
  },
};
