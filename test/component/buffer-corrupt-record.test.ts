// A damaged spill record against the real demo gateway (issue 9, item 1): one row of a real
// buffer.db is overwritten with bytes that are not an AgentMessage. Before the fix the gateway
// ended every call on that item (INTERNAL: Error deserializing request), the collector put it
// back at the front uncharged, and nothing behind it was ever delivered.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { DurableBuffer } from '../../collector/buffer/durable-buffer.js';
import { recordChecksum } from '../../collector/buffer/record-checksum.js';
import { makeTempDir, type TempDir } from '../helpers/buffer-test-support.js';
import { startHarness, stateItem, type Harness } from '../helpers/gateway-harness.js';

const ITEMS = 45;
/** Not protobuf: tag 0xff has wire type 7, which no decoder accepts. */
const GARBAGE = Buffer.alloc(64, 0xff);

const dirs: TempDir[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) dir.remove();
});

/** A buffer.db holding items 0..count-1, every one on disk (written by a closed buffer). */
async function spillFile(count = ITEMS): Promise<string> {
  const dir = makeTempDir();
  dirs.push(dir);
  const path = join(dir.path, 'buffer.db');
  const writer = new DurableBuffer(
    { path, maxMemoryBytes: 1024 * 1024, maxDiskBytes: 8 * 1024 * 1024 },
    { logger: pino({ level: 'silent' }) },
  );
  for (let n = 0; n < count; n++) writer.enqueue(stateItem(n));
  await writer.close();
  return path;
}

/**
 * Overwrites the payload of the row holding `id`, as a bad sector or a stray write would; with
 * `matchingChecksum` the stored checksum is rewritten to match, so only the gateway can tell.
 */
function overwritePayload(
  path: string,
  id: string,
  bytes: Uint8Array,
  matchingChecksum = false,
): void {
  const db = new Database(path);
  try {
    const crc = matchingChecksum ? recordChecksum(id, bytes) : null;
    const sql = matchingChecksum
      ? 'UPDATE items SET payload = ?, crc = ? WHERE id = ?'
      : 'UPDATE items SET payload = ? WHERE id = ?';
    const args = matchingChecksum ? [bytes, crc, id] : [bytes, id];
    expect(db.prepare(sql).run(...args).changes).toBe(1);
  } finally {
    db.close();
  }
}

/** SQLite's page type byte of a table b-tree leaf. */
const TABLE_LEAF = 0x0d;

/**
 * The items on each table leaf page of the file, read from the raw bytes (every record holds
 * its id in clear), so the test knows what a damaged page holds without asking SQLite.
 */
function leafPages(path: string): { offset: number; items: number[] }[] {
  const bytes = readFileSync(path);
  const pageSize = bytes.readUInt16BE(16);
  const pages: { offset: number; items: number[] }[] = [];
  for (let offset = pageSize; offset < bytes.length; offset += pageSize) {
    if (bytes[offset] !== TABLE_LEAF) continue;
    const text = bytes.subarray(offset, offset + pageSize).toString('latin1');
    const items = new Set([...text.matchAll(/item-(\d{5})/g)].map((m) => Number(m[1])));
    if (items.size > 0) pages.push({ offset, items: [...items].sort((a, b) => a - b) });
  }
  return pages;
}

function quarantineRows(path: string): { id: string; reason: string }[] {
  const db = new Database(path, { readonly: true });
  try {
    return db
      .prepare<[], { id: string; reason: string }>('SELECT id, reason FROM quarantine')
      .all();
  } finally {
    db.close();
  }
}

/** Nothing waiting and nothing in flight: every ack is in. */
function settled(h: Harness): boolean {
  const { pending, inflight } = h.buffer.stats();
  return pending === 0 && inflight === 0;
}

/**
 * Lets the stream run: wakes every sleep it asks for (reconnect backoff, redelivery sweep),
 * between turns of the real event loop, until `done` holds or `rounds` run out.
 */
async function drive(h: Harness, done: () => boolean, rounds = 400): Promise<void> {
  for (let i = 0; i < rounds && !done(); i++) {
    await new Promise<void>((resolve) => setTimeout(resolve, 5));
    if (h.clock.pending().length > 0) h.clock.advance(1000);
  }
}

describe('a corrupt spill record', () => {
  it('is set aside and counted, and every item behind it is delivered', async () => {
    const path = await spillFile();
    const bad = stateItem(10).id;
    overwritePayload(path, bad, GARBAGE);

    await using h = await startHarness({ bufferPath: path });
    const delivered = (): number => h.gateway.store.count('state');
    await drive(h, () => delivered() >= ITEMS - 1 && settled(h));

    expect(delivered()).toBe(ITEMS - 1);
    expect(h.gateway.store.messageIds('state')).not.toContain(bad);
    const stats = h.buffer.stats();
    expect(stats.quarantined).toBe(1);
    expect(stats.dropped.quarantined).toBe(1);
    expect(stats).toMatchObject({ pending: 0, inflight: 0 });
    expect(quarantineRows(path)).toEqual([{ id: bad, reason: 'checksum' }]);
  });

  it('that the gateway cannot decode ends sessions until it is quarantined, then the rest flows', async () => {
    const path = await spillFile();
    const bad = stateItem(10).id;
    // The checksum matches: the buffer hands it out, and the gateway ends the call on it.
    overwritePayload(path, bad, GARBAGE, true);

    await using h = await startHarness({ bufferPath: path });
    const delivered = (): number => h.gateway.store.count('state');
    await drive(h, () => delivered() >= ITEMS - 1 && settled(h));

    expect(delivered()).toBe(ITEMS - 1);
    expect(h.gateway.store.messageIds('state')).not.toContain(bad);
    const stats = h.buffer.stats();
    expect(stats).toMatchObject({ quarantined: 1, pending: 0, inflight: 0 });
    expect(stats.dropped.quarantined).toBe(1);
    const ends = h.logs.lines.filter((l) => l.msg.startsWith('session ended with this item'));
    // The first session ends with many items in flight; the second sends the suspect alone.
    expect(ends.map((l) => l['id'])).toEqual([bad]);
    const quarantined = h.logs.lines.find((l) => l.msg.startsWith('item quarantined'));
    expect(quarantined?.msg).toMatch(/could not decode it \(INTERNAL: .*deserializ/i);
    expect(quarantineRows(path)).toEqual([{ id: bad, reason: 'rejected' }]);
  });

  it('on a damaged page costs only the rows on that page: the rest is salvaged and delivered', async () => {
    const count = 600;
    const path = await spillFile(count);
    const pages = leafPages(path);
    expect(pages.length).toBeGreaterThan(4);
    const damaged = pages[Math.floor(pages.length / 2)];
    if (!damaged) throw new Error('no leaf page');
    const bytes = readFileSync(path);
    bytes.fill(0xff, damaged.offset, damaged.offset + 32);
    writeFileSync(path, bytes);

    await using h = await startHarness({ bufferPath: path });
    const expected = Array.from({ length: count }, (_, n) => n).filter(
      (n) => !damaged.items.includes(n),
    );
    await drive(h, () => h.gateway.store.count('state') >= expected.length && settled(h));

    expect(h.gateway.store.messageIds('state')).toEqual(expected.map((n) => stateItem(n).id));
    const lost = damaged.items.length;
    const stats = h.buffer.stats();
    expect(stats.salvage).toEqual({ recovered: count - lost, lost });
    expect(stats.dropped.disk_error).toBe(lost);
    const line = h.logs.lines.find((l) => l.msg.startsWith('spill database unreadable'));
    expect(line?.msg).toContain(`salvaged ${String(count - lost)} rows, lost ${String(lost)}`);
    expect(line).toMatchObject({ salvagedRows: count - lost, lostRows: lost, lostExact: true });
  });
});
