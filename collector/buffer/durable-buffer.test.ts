import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { DurableBuffer, PRESSURE_MEMORY_BYTES } from './durable-buffer.js';
import { isCorruption, isDiskFull } from '../sqlite/sqlite-errors.js';
import {
  captureLogger,
  makeItem,
  makeTempDir,
  numbers,
  type TempDir,
} from '../../test/helpers/buffer-test-support.js';
import { itemBytes, type BufferOptions, type DropReason } from './types.js';

const ITEM = itemBytes(makeItem(0)); // accounting size of one 200-byte test item
const range = (from: number, to: number): number[] =>
  Array.from({ length: to - from }, (_, i) => from + i);

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function tempDir(): TempDir {
  const dir = makeTempDir();
  cleanups.push(() => {
    dir.remove();
  });
  return dir;
}

function openBuffer(
  dir: TempDir,
  options: Partial<BufferOptions> = {},
  now = Date.UTC(2025, 0, 2, 3, 4, 5),
) {
  const captured = captureLogger();
  const counted: Partial<Record<DropReason | 'spilled' | 'replayed', number>> = {};
  const add = (key: DropReason | 'spilled' | 'replayed', n: number): void => {
    counted[key] = (counted[key] ?? 0) + n;
  };
  const buffer = new DurableBuffer(
    {
      path: join(dir.path, 'buffer.db'),
      maxMemoryBytes: 10 * ITEM,
      maxDiskBytes: 1_000 * ITEM,
      ...options,
    },
    {
      logger: captured.logger,
      counters: {
        spilled: (n) => {
          add('spilled', n);
        },
        replayed: (n) => {
          add('replayed', n);
        },
        dropped: (reason, n) => {
          add(reason, n);
        },
      },
      now: () => now,
    },
  );
  cleanups.push(() => buffer.close());
  return { buffer, lines: captured.lines, counted };
}

function enqueueRange(
  buffer: DurableBuffer,
  from: number,
  to: number,
  kind = 'log' as const,
): void {
  for (const n of range(from, to)) buffer.enqueue(makeItem(n, kind));
}

function takeAll(buffer: DurableBuffer, batch = 7) {
  const out = [];
  for (;;) {
    const items = buffer.take(batch);
    if (items.length === 0) return out;
    out.push(...items);
  }
}

describe('DurableBuffer ordering', () => {
  it('keeps FIFO order in memory alone', () => {
    const { buffer } = openBuffer(tempDir(), { maxMemoryBytes: 100 * ITEM });
    enqueueRange(buffer, 0, 20);
    expect(buffer.stats().disk.depth).toBe(0);
    expect(numbers(takeAll(buffer))).toEqual(range(0, 20));
  });

  it('spills the oldest items to disk and keeps FIFO order across both tiers', () => {
    const { buffer, counted } = openBuffer(tempDir());
    enqueueRange(buffer, 0, 100);
    const stats = buffer.stats();
    expect(stats.disk.depth).toBeGreaterThan(80);
    expect(stats.memory.bytes).toBeLessThanOrEqual(10 * ITEM);
    expect(stats.memory.depth + stats.disk.depth).toBe(100);
    expect(stats.spilled).toBe(stats.disk.depth);
    expect(counted.spilled).toBe(stats.disk.depth);
    const taken = takeAll(buffer);
    expect(numbers(taken)).toEqual(range(0, 100));
    expect(taken[3]!.payload.subarray(0, 3).toString()).toBe('#3#');
    expect(buffer.stats().replayed).toBe(stats.disk.depth);
  });

  it('keeps FIFO order when enqueues and takes interleave', () => {
    const { buffer } = openBuffer(tempDir());
    const seen: number[] = [];
    for (let round = 0; round < 10; round++) {
      enqueueRange(buffer, round * 37, (round + 1) * 37);
      seen.push(...numbers(buffer.take(23)));
    }
    seen.push(...numbers(takeAll(buffer)));
    expect(seen).toEqual(range(0, 370));
  });

  it('an item larger than memory goes to disk after the older memory items', () => {
    const { buffer } = openBuffer(tempDir());
    enqueueRange(buffer, 0, 5);
    buffer.enqueue(makeItem(5, 'log', 20 * ITEM));
    enqueueRange(buffer, 6, 8);
    expect(numbers(takeAll(buffer))).toEqual(range(0, 8));
  });
});

describe('DurableBuffer settling', () => {
  it('acked items never come back; returned ones come back first, in order', () => {
    const { buffer } = openBuffer(tempDir());
    enqueueRange(buffer, 0, 30);
    const first = buffer.take(10);
    expect(buffer.stats().inflight).toBe(10);
    expect(buffer.ack(first.filter((_, i) => i % 2 === 0).map((i) => i.id))).toBe(5);
    expect(buffer.ack(['i-000000', 'unknown'])).toBe(0);
    expect(buffer.requeue()).toBe(5);
    expect(numbers(takeAll(buffer))).toEqual([1, 3, 5, 7, 9, ...range(10, 30)]);
  });

  it('requeues only the listed ids and merges them in sequence order', () => {
    const { buffer } = openBuffer(tempDir());
    enqueueRange(buffer, 0, 20);
    buffer.take(6);
    buffer.requeue(['i-000004']);
    buffer.requeue(['i-000001']);
    expect(numbers(buffer.take(3))).toEqual([1, 4, 6]);
    expect(buffer.stats().inflight).toBe(7);
  });

  it('discard settles without delivery and counts the reason', () => {
    const { buffer, counted } = openBuffer(tempDir());
    enqueueRange(buffer, 0, 3);
    buffer.take(3);
    expect(buffer.discard(['i-000000', 'i-000001'])).toBe(2);
    expect(counted.discarded).toBe(2);
    expect(buffer.stats().dropped.discarded).toBe(2);
    buffer.requeue();
    expect(numbers(takeAll(buffer))).toEqual([2]);
  });

  it('waitForItems resolves on enqueue and rejects on abort', async () => {
    const { buffer } = openBuffer(tempDir());
    const waiting = buffer.waitForItems(new AbortController().signal);
    buffer.enqueue(makeItem(1));
    await expect(waiting).resolves.toBeUndefined();
    buffer.take(1);
    const controller = new AbortController();
    const aborted = buffer.waitForItems(controller.signal);
    controller.abort(new Error('stop'));
    await expect(aborted).rejects.toThrow('stop');
  });
});

describe('DurableBuffer persistence', () => {
  it('close() flushes memory; a new instance replays every unacked item in order, never an acked one', async () => {
    const dir = tempDir();
    const first = openBuffer(dir);
    enqueueRange(first.buffer, 0, 30);
    const taken = first.buffer.take(12);
    first.buffer.ack(taken.slice(0, 5).map((i) => i.id));
    first.buffer.requeue(['i-000007']);
    await first.buffer.close();
    await first.buffer.close(); // idempotent

    const second = openBuffer(dir);
    expect(second.buffer.stats().recovered).toBe(25);
    expect(second.buffer.stats().disk.depth).toBe(25);
    const replayed = takeAll(second.buffer);
    expect(numbers(replayed)).toEqual(range(5, 30));
    second.buffer.ack(replayed.slice(0, 10).map((i) => i.id));
    await second.buffer.close();

    const third = openBuffer(dir);
    expect(numbers(takeAll(third.buffer))).toEqual(range(15, 30));
  });

  it('items already on disk survive an instance that never closed', async () => {
    const dir = tempDir();
    const writer = openBuffer(dir);
    enqueueRange(writer.buffer, 0, 100);
    const inflight = writer.buffer.take(20);
    writer.buffer.ack(inflight.slice(0, 10).map((i) => i.id));
    const onDisk = writer.buffer.stats().disk.depth; // rows: 10 in flight + never-taken spilled

    // The writer is not closed: a second instance reads the same file as a restarted process
    // would after a crash. Only the memory tier (never written) is missing.
    const reader = openBuffer(dir);
    const recovered = numbers(takeAll(reader.buffer));
    expect(recovered.length).toBe(onDisk);
    expect(recovered).toEqual(range(10, 10 + onDisk));
    await reader.buffer.close();
  });

  it('opens a version 1 file (no checksums): its rows replay, new rows get a checksum', async () => {
    const dir = tempDir();
    const v1 = new Database(join(dir.path, 'buffer.db'));
    v1.exec(`CREATE TABLE items (seq INTEGER PRIMARY KEY, id TEXT NOT NULL, kind INTEGER NOT NULL,
      bytes INTEGER NOT NULL, payload BLOB NOT NULL);
      CREATE INDEX items_kind_seq ON items (kind, seq);`);
    const insert = v1.prepare('INSERT INTO items VALUES (?, ?, 0, ?, ?)');
    for (const n of range(0, 5)) {
      const item = makeItem(n);
      insert.run(n + 1, item.id, itemBytes(item), item.payload);
    }
    v1.pragma('user_version = 1');
    v1.close();

    const { buffer } = openBuffer(dir);
    expect(buffer.stats().recovered).toBe(5);
    enqueueRange(buffer, 5, 40);
    await buffer.close();
    const db = new Database(join(dir.path, 'buffer.db'), { readonly: true });
    const rows = db
      .prepare<[], { seq: number; crc: number | null }>('SELECT seq, crc FROM items ORDER BY seq')
      .all();
    expect(db.pragma('user_version', { simple: true })).toBe(2);
    db.close();
    expect(rows.slice(0, 5).map((r) => r.crc)).toEqual([null, null, null, null, null]);
    expect(rows.slice(5).every((r) => typeof r.crc === 'number')).toBe(true);
    expect(numbers(takeAll(openBuffer(dir).buffer))).toEqual(range(0, 40));
  });

  it('a fresh buffer continues sequence numbers after the replayed ones', async () => {
    const dir = tempDir();
    const first = openBuffer(dir);
    enqueueRange(first.buffer, 0, 5);
    await first.buffer.close();
    const second = openBuffer(dir);
    enqueueRange(second.buffer, 5, 40);
    expect(numbers(takeAll(second.buffer))).toEqual(range(0, 40));
  });
});

describe('DurableBuffer overflow policy', () => {
  // memory 10 items, disk 20 items: 30 items in all.
  const small = { maxMemoryBytes: 10 * ITEM, maxDiskBytes: 20 * ITEM };

  it('drops the oldest logs first and keeps every state item', () => {
    const { buffer, counted } = openBuffer(tempDir(), small);
    enqueueRange(buffer, 0, 10, 'log');
    for (const n of range(10, 20)) buffer.enqueue(makeItem(n, 'state'));
    enqueueRange(buffer, 20, 40, 'log');
    const dropped = buffer.stats().dropped;
    expect(dropped.overflow_log).toBeGreaterThanOrEqual(10);
    expect(dropped.overflow_state).toBe(0);
    expect(counted.overflow_log).toBe(dropped.overflow_log);
    const left = takeAll(buffer);
    const state = left.filter((i) => i.kind === 'state');
    expect(numbers(state)).toEqual(range(10, 20));
    const logs = numbers(left.filter((i) => i.kind === 'log'));
    // The newest logs survive, the oldest went first, and order is kept.
    expect(logs.at(-1)).toBe(39);
    expect(logs).toEqual([...logs].sort((a, b) => a - b));
    expect(logs.length + dropped.overflow_log).toBe(30);
  });

  it('drops an incoming log rather than displace state, and counts it', () => {
    const { buffer } = openBuffer(tempDir(), small);
    for (const n of range(0, 30)) buffer.enqueue(makeItem(n, 'state'));
    enqueueRange(buffer, 30, 35, 'log');
    expect(buffer.stats().dropped.overflow_log).toBe(5);
    expect(buffer.stats().dropped.overflow_state).toBe(0);
    expect(numbers(takeAll(buffer))).toEqual(range(0, 30));
  });

  it('drops metrics before state, and state only for newer state, loudly', () => {
    const { buffer, lines } = openBuffer(tempDir(), small);
    for (const n of range(0, 25)) buffer.enqueue(makeItem(n, 'state'));
    for (const n of range(25, 30)) buffer.enqueue(makeItem(n, 'metric'));
    for (const n of range(30, 35)) buffer.enqueue(makeItem(n, 'state'));
    expect(buffer.stats().dropped.overflow_metric).toBe(5);
    expect(buffer.stats().dropped.overflow_state).toBe(0);
    buffer.enqueue(makeItem(35, 'state'));
    expect(buffer.stats().dropped.overflow_state).toBe(1);
    expect(lines.some((l) => l.level === 50 && l['kind'] === 'state')).toBe(true);
    expect(numbers(takeAll(buffer))).toEqual([...range(1, 25), ...range(30, 36)]);
  });

  it('never drops items in flight or returned, only never-taken ones', () => {
    const { buffer } = openBuffer(tempDir(), small);
    enqueueRange(buffer, 0, 30);
    buffer.take(5);
    buffer.requeue(['i-000000', 'i-000001']);
    enqueueRange(buffer, 30, 40);
    const left = numbers(takeAll(buffer));
    expect(left.slice(0, 2)).toEqual([0, 1]);
    expect(buffer.stats().inflight).toBe(5 + left.length - 2);
    expect(left.at(-1)).toBe(39);
  });

  it('drops an item larger than the disk cap as too_large', () => {
    const { buffer } = openBuffer(tempDir(), small);
    buffer.enqueue(makeItem(1, 'state', 30 * ITEM));
    expect(buffer.stats().dropped.too_large).toBe(1);
    expect(buffer.take(1)).toEqual([]);
  });

  it('counts an enqueue after close as dropped', async () => {
    const { buffer } = openBuffer(tempDir());
    await buffer.close();
    buffer.enqueue(makeItem(1));
    expect(buffer.stats().dropped.closed).toBe(1);
  });
});

describe('DurableBuffer quarantine', () => {
  function quarantineTable(dir: TempDir): { id: string; reason: string; payload: Buffer }[] {
    const db = new Database(join(dir.path, 'buffer.db'), { readonly: true });
    try {
      return db
        .prepare<[], { id: string; reason: string; payload: Buffer }>(
          'SELECT id, reason, payload FROM quarantine ORDER BY seq',
        )
        .all();
    } finally {
      db.close();
    }
  }

  it('sets in-flight items aside, from memory and from disk, settled and counted', async () => {
    const dir = tempDir();
    const { buffer, counted, lines } = openBuffer(dir);
    const released: string[] = [];
    buffer.onRelease((ids) => released.push(...ids));
    enqueueRange(buffer, 0, 30); // 0..19 on disk, the newest in memory
    const taken = takeAll(buffer);
    expect(buffer.quarantine(['i-000003', 'i-000027', 'unknown'])).toBe(2);
    expect(buffer.stats()).toMatchObject({ quarantined: 2, inflight: 28 });
    expect(buffer.stats().dropped.quarantined).toBe(2);
    expect(counted.quarantined).toBe(2);
    expect(released).toEqual(expect.arrayContaining(['i-000003', 'i-000027']));
    expect(lines.filter((l) => l.msg.startsWith('record refused by the gateway'))).toHaveLength(2);
    buffer.ack(taken.map((i) => i.id));
    await buffer.close();

    const rows = quarantineTable(dir);
    expect(rows.map((r) => [r.id, r.reason])).toEqual([
      ['i-000003', 'rejected'],
      ['i-000027', 'rejected'],
    ]);
    expect(rows[1]?.payload.subarray(0, 4).toString()).toBe('#27#');
    // Settled: nothing comes back after a restart.
    expect(takeAll(openBuffer(dir).buffer)).toEqual([]);
  });
});

describe('DurableBuffer releases', () => {
  function watchReleases(buffer: DurableBuffer): number[] {
    const released: number[] = [];
    buffer.onRelease((ids) => {
      released.push(...ids.map((id) => Number(id.slice(2))));
    });
    return released;
  }

  it('releases items when they are spilled to disk, not while only in memory', () => {
    const dir = tempDir();
    const { buffer } = openBuffer(dir);
    const released = watchReleases(buffer);
    enqueueRange(buffer, 0, 10);
    expect(released).toEqual([]);
    enqueueRange(buffer, 10, 12);
    expect(released.length).toBeGreaterThan(0);
    expect(released).toEqual(range(0, released.length));
  });

  it('releases acked memory items, and every memory item flushed by close()', async () => {
    const dir = tempDir();
    const { buffer } = openBuffer(dir);
    const released = watchReleases(buffer);
    enqueueRange(buffer, 0, 4);
    buffer.ack(buffer.take(2).map((item) => item.id));
    expect(released).toEqual([0, 1]);
    await buffer.close();
    expect(released.sort((a, b) => a - b)).toEqual([0, 1, 2, 3]);
  });

  it('releases items the overflow policy drops from memory, and stops after unsubscribe', () => {
    const dir = tempDir();
    const { buffer } = openBuffer(dir, { maxDiskBytes: 5 * ITEM });
    const released = watchReleases(buffer);
    enqueueRange(buffer, 0, 30);
    expect(buffer.stats().dropped.overflow_log).toBeGreaterThan(0);
    // Every id that left memory (spilled or dropped) was released; none twice here.
    expect(new Set(released).size).toBe(released.length);
    expect(released.length).toBeGreaterThanOrEqual(buffer.stats().dropped.overflow_log);
  });

  it('stops calling a listener once it unsubscribes, and only that one', () => {
    const dir = tempDir();
    const { buffer } = openBuffer(dir, { maxDiskBytes: 5 * ITEM });
    // Recorded, not thrown: the buffer catches what a listener throws, so a throw proves nothing.
    const late: string[] = [];
    const off = buffer.onRelease((ids) => late.push(...ids));
    const kept = watchReleases(buffer);
    off();
    enqueueRange(buffer, 0, 30);
    expect(kept.length).toBeGreaterThan(0);
    expect(late).toEqual([]);
  });

  it('does not release an item dropped at enqueue after close', async () => {
    const dir = tempDir();
    const { buffer } = openBuffer(dir);
    const released = watchReleases(buffer);
    await buffer.close();
    enqueueRange(buffer, 0, 1);
    expect(released).toEqual([]);
  });
});

describe('DurableBuffer unreadable database', () => {
  function movedAside(dir: TempDir): string[] {
    return readdirSync(dir.path).filter((f) => f.includes('.corrupt-'));
  }

  it('moves a file that is not a database aside, reports it, and starts empty', () => {
    const dir = tempDir();
    writeFileSync(join(dir.path, 'buffer.db'), 'this is not an SQLite database, '.repeat(200));
    const { buffer, lines } = openBuffer(dir);
    expect(movedAside(dir)).toEqual(['buffer.db.corrupt-20250102T030405000Z']);
    const error = lines.find((l) => l.level === 50);
    expect(error?.msg).toMatch(/unreadable.*moved aside/);
    expect(error?.['movedAsidePath']).toMatch(/corrupt-/);
    enqueueRange(buffer, 0, 30);
    expect(numbers(takeAll(buffer))).toEqual(range(0, 30));
  });

  it('moves aside a file with an unknown schema version', () => {
    const dir = tempDir();
    const db = new Database(join(dir.path, 'buffer.db'));
    db.pragma('user_version = 99');
    db.close();
    const { buffer } = openBuffer(dir);
    expect(movedAside(dir)).toHaveLength(1);
    enqueueRange(buffer, 0, 3);
    expect(numbers(takeAll(buffer))).toEqual(range(0, 3));
  });

  it('never wedges on a database with damaged pages', async () => {
    const dir = tempDir();
    const first = openBuffer(dir);
    enqueueRange(first.buffer, 0, 300);
    await first.buffer.close();
    const path = join(dir.path, 'buffer.db');
    const bytes = readFileSync(path);
    // Keep the 100-byte header, scribble over the b-tree pages after it.
    bytes.fill(0xa5, 4096, bytes.length - 4096);
    writeFileSync(path, bytes);

    const { buffer, lines } = openBuffer(dir);
    // Either the damage was detected at open (file moved aside) or the rows read back fail
    // one by one: both end with a working buffer and every loss reported.
    takeAll(buffer);
    enqueueRange(buffer, 1000, 1030);
    const tail = numbers(takeAll(buffer));
    expect(tail).toEqual(range(1000, 1030));
    expect(lines.some((l) => l.level === 50)).toBe(true);
    expect(existsSync(path)).toBe(true);
  });

  it('keeps only the newest moved-aside file when the database is corrupt again', async () => {
    const dir = tempDir();
    const path = join(dir.path, 'buffer.db');
    writeFileSync(path, 'not a database, '.repeat(400));
    const first = openBuffer(dir, {}, Date.UTC(2025, 0, 2, 3, 4, 5));
    await first.buffer.close();
    for (const suffix of ['-wal', '-shm']) rmSync(path + suffix, { force: true });
    writeFileSync(path, 'still not a database, '.repeat(400));

    const { buffer, lines } = openBuffer(dir, {}, Date.UTC(2025, 0, 3, 0, 0, 0));
    expect(movedAside(dir)).toEqual(['buffer.db.corrupt-20250103T000000000Z']);
    expect(readFileSync(join(dir.path, movedAside(dir)[0] ?? '')).toString()).toMatch(/^still/);
    expect(lines.some((l) => l.msg.includes('deleted an earlier moved-aside'))).toBe(true);
    enqueueRange(buffer, 0, 30);
    expect(numbers(takeAll(buffer))).toEqual(range(0, 30));
  });
});

describe('DurableBuffer disk faults', () => {
  function movedAside(dir: TempDir): string[] {
    return readdirSync(dir.path).filter((f) => f.includes('.corrupt-'));
  }

  /** Every spill database opened from now on refuses to grow past `pages` pages (SQLITE_FULL). */
  function capDatabasePages(pages: number): void {
    // eslint-disable-next-line @typescript-eslint/unbound-method -- called with .call(this)
    const original = Database.prototype.pragma;
    const spy = vi.spyOn(Database.prototype, 'pragma').mockImplementation(function (
      this: Database.Database,
      source,
      options,
    ) {
      const result = original.call(this, source, options);
      if (source === 'journal_mode = WAL') original.call(this, `max_page_count = ${pages}`);
      return result;
    });
    cleanups.push(() => {
      spy.mockRestore();
    });
  }

  it('classifies SQLite error codes, extended codes included', () => {
    const err = (code: string): Error => Object.assign(new Error(code), { code });
    expect(isCorruption(err('SQLITE_CORRUPT'))).toBe(true);
    expect(isCorruption(err('SQLITE_CORRUPT_INDEX'))).toBe(true);
    expect(isCorruption(err('SQLITE_NOTADB'))).toBe(true);
    expect(isCorruption(err('SQLITE_FULL'))).toBe(false);
    expect(isCorruption(err('SQLITE_IOERR_WRITE'))).toBe(false);
    expect(isCorruption(err('SQLITE_CORRUPTION_LOOKALIKE'))).toBe(false);
    expect(isCorruption(new Error('no code'))).toBe(false);
    expect(isDiskFull(err('SQLITE_FULL'))).toBe(true);
    expect(isDiskFull(err('SQLITE_IOERR'))).toBe(false);
  });

  it('a full disk (SQLITE_FULL) keeps the file, drops by the overflow policy, and never throws', () => {
    const dir = tempDir();
    capDatabasePages(8);
    const { buffer, lines, counted } = openBuffer(dir);
    expect(() => {
      enqueueRange(buffer, 0, 300);
      for (const n of range(1000, 1005)) buffer.enqueue(makeItem(n, 'state'));
    }).not.toThrow();

    const stats = buffer.stats();
    expect(movedAside(dir)).toEqual([]);
    expect(stats.diskAvailable).toBe(true);
    expect(stats.diskFull).toBe(true);
    expect(stats.dropped.disk_error).toBe(0);
    expect(stats.disk.depth).toBeGreaterThan(0); // what fitted before the disk filled
    expect(stats.dropped.overflow_log).toBeGreaterThan(0);
    expect(counted.overflow_log).toBe(stats.dropped.overflow_log);
    expect(
      lines.some((l) => l.msg.startsWith('spill disk full') && l['code'] === 'SQLITE_FULL'),
    ).toBe(true);

    // Nothing lost silently: every item is either delivered or counted, in FIFO order, and the
    // state items displaced logs rather than being dropped.
    const taken = numbers(takeAll(buffer));
    expect(taken.length + stats.dropped.overflow_log).toBe(305);
    expect(taken).toEqual([...taken].sort((a, b) => a - b));
    expect(taken.slice(-5)).toEqual(range(1000, 1005));
    // Everything taken is in flight; acking it on the full disk settles it, rows included.
    expect(buffer.stats().inflight).toBe(taken.length);
    expect(buffer.ack(taken.map((n) => makeItem(n).id))).toBe(taken.length);
    expect(buffer.stats()).toMatchObject({ inflight: 0, disk: { depth: 0, bytes: 0 } });
  });

  it('take(n) hands out at most n, take(0) nothing, and the rest stays pending', () => {
    const { buffer } = openBuffer(tempDir());
    enqueueRange(buffer, 0, 30); // 10 in memory, 20 on disk
    expect(buffer.take(0)).toEqual([]);
    expect(numbers(buffer.take(3))).toEqual([0, 1, 2]);
    expect(buffer.stats()).toMatchObject({ pending: 27, inflight: 3 });
    expect(numbers(buffer.take(100))).toEqual(range(3, 30));
  });

  it('an ack whose row delete fails (the file is locked) does not throw; the rows come back on restart', () => {
    const dir = tempDir();
    const { buffer, lines } = openBuffer(dir);
    enqueueRange(buffer, 0, 40);
    const taken = buffer.take(15); // all from disk: the oldest were spilled
    expect(buffer.stats().disk.depth).toBeGreaterThanOrEqual(15);
    // Another process holds the write lock: the delete waits out the busy timeout, then fails.
    const other = new Database(join(dir.path, 'buffer.db'));
    cleanups.push(() => {
      other.close();
    });
    other.exec('BEGIN IMMEDIATE');
    let settled = 0;
    expect(() => (settled = buffer.ack(taken.map((i) => i.id)))).not.toThrow();
    expect(settled).toBe(15);
    expect(lines.some((l) => l['operation'] === 'delete acked rows' && l.level === 50)).toBe(true);
    other.exec('ROLLBACK');

    // The rows are still in the file: a restart delivers them again (the gateway dedups by id).
    const reader = openBuffer(dir);
    expect(numbers(takeAll(reader.buffer)).slice(0, 15)).toEqual(range(0, 15));
  }, 30_000);

  it('an ack or a close on a full disk does not throw either', async () => {
    const dir = tempDir();
    capDatabasePages(8);
    const { buffer } = openBuffer(dir);
    enqueueRange(buffer, 0, 300);
    const items = buffer.take(50);
    expect(() => buffer.ack(items.map((i) => i.id))).not.toThrow();
    expect(() => buffer.requeue()).not.toThrow();
    await expect(buffer.close()).resolves.toBeUndefined();
    expect(movedAside(dir)).toEqual([]);
  });

  it('starts memory-only when the database cannot be opened, and says so', async () => {
    const dir = tempDir();
    // A directory where the file should be: SQLITE_CANTOPEN, not corruption.
    mkdirSync(join(dir.path, 'buffer.db'));
    const { buffer, lines } = openBuffer(dir);
    expect(buffer.stats()).toMatchObject({ diskAvailable: false, disk: { depth: 0, bytes: 0 } });
    const error = lines.find((l) => l.level === 50);
    expect(error?.msg).toMatch(/cannot be opened.*memory-only/);
    expect(movedAside(dir)).toEqual([]);

    // Memory (10 items) is the only tier: the overflow policy sheds the oldest logs.
    expect(() => {
      enqueueRange(buffer, 0, 30);
    }).not.toThrow();
    expect(buffer.stats().dropped.overflow_log).toBe(20);
    expect(numbers(takeAll(buffer))).toEqual(range(20, 30));
    await expect(buffer.close()).resolves.toBeUndefined();
  });
});

describe('DurableBuffer under heap pressure (shedMemory)', () => {
  const BIG = 64 * 1024;
  const big = (buffer: DurableBuffer, from: number, to: number): void => {
    for (const n of range(from, to)) buffer.enqueue(makeItem(n, 'log', BIG));
  };

  it('moves the pending memory items to disk, spills new ones at once, and keeps FIFO order', () => {
    const { buffer } = openBuffer(tempDir(), {
      maxMemoryBytes: 64 * BIG,
      maxDiskBytes: 1_000 * BIG,
    });
    big(buffer, 0, 40);
    expect(buffer.stats().disk.depth).toBe(0);
    const moved = buffer.shedMemory(true);
    expect(moved.items).toBeGreaterThanOrEqual(36);
    expect(buffer.stats().memory.bytes).toBeLessThanOrEqual(PRESSURE_MEMORY_BYTES);
    big(buffer, 40, 60);
    expect(buffer.stats().memory.bytes).toBeLessThanOrEqual(PRESSURE_MEMORY_BYTES);
    buffer.shedMemory(false);
    big(buffer, 60, 80);
    expect(buffer.stats().memory.depth).toBeGreaterThanOrEqual(20);
    expect(numbers(takeAll(buffer))).toEqual(range(0, 80));
  });

  it('drops nothing for it: what the disk cannot take stays in memory', () => {
    const { buffer, counted } = openBuffer(tempDir(), {
      maxMemoryBytes: 64 * BIG,
      maxDiskBytes: 10 * BIG,
    });
    big(buffer, 0, 30);
    buffer.shedMemory(true);
    big(buffer, 30, 50);
    const stats = buffer.stats();
    expect(stats.disk.depth).toBeLessThanOrEqual(10);
    expect(stats.memory.depth + stats.disk.depth).toBe(50);
    expect(counted.overflow_log ?? 0).toBe(0);
    expect(numbers(takeAll(buffer))).toEqual(range(0, 50));
  });
});
