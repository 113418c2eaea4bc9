// A damaged pod-logs.db must not stop the collector (issue 10): the shared SQLite policy
// salvages every readable checkpoint into a fresh file and moves the damaged one aside.
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import {
  captureLogger,
  makeTempDir,
  type TempDir,
} from '../../../test/helpers/buffer-test-support.js';
import { openCheckpointStore, type ContainerInstance } from './checkpoint-store.js';

const NOW = Date.UTC(2025, 0, 2, 3, 4, 5);
const dirs: TempDir[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) dir.remove();
});

function tempDir(): TempDir {
  const dir = makeTempDir('kubexa-checkpoints-');
  dirs.push(dir);
  return dir;
}

const instance = (n: number): ContainerInstance => ({
  podUid: `uid-${String(n).padStart(5, '0')}`,
  container: 'app',
  restartCount: 0,
});
const meta = { namespace: 'default', podName: 'pod' };

/** A checkpoint file with `count` instances, instance n at position (n, 0, 1). */
function writeCheckpoints(path: string, count: number): void {
  const store = openCheckpointStore(path, () => NOW);
  store.advance(
    Array.from({ length: count }, (_, n) => ({
      instance: instance(n),
      meta,
      position: { sec: n + 1, nanos: 0, count: 1 },
      released: [],
    })),
  );
  store.close();
}

const movedAside = (dir: TempDir): string[] =>
  readdirSync(dir.path).filter((name) => name.includes('.corrupt-'));

describe('checkpoint store on a damaged file', () => {
  it('starts with an empty store when the file is not a database, and moves it aside', () => {
    const dir = tempDir();
    const path = join(dir.path, 'pod-logs.db');
    writeFileSync(path, 'this is not an SQLite database, '.repeat(200));
    const { logger, lines } = captureLogger();

    const store = openCheckpointStore(path, () => NOW, logger);
    expect(store.load(instance(1))).toEqual({ position: undefined, intents: [], finished: false });
    store.advance([
      { instance: instance(1), meta, position: { sec: 5, nanos: 0, count: 1 }, released: [] },
    ]);
    expect(store.load(instance(1)).position).toEqual({ sec: 5, nanos: 0, count: 1 });
    store.close();
    expect(movedAside(dir)).toEqual(['pod-logs.db.corrupt-20250102T030405000Z']);
    const error = lines.find((l) => l.level === 50);
    expect(error?.msg).toMatch(
      /^checkpoint database unreadable .*nothing salvaged; damaged file moved aside/,
    );
  });

  it('salvages every checkpoint but those on a damaged page, and says how many were lost', () => {
    const dir = tempDir();
    const path = join(dir.path, 'pod-logs.db');
    const count = 400;
    writeCheckpoints(path, count);
    // The table's leaf pages (type 0x0d), with the pod uids each holds in clear.
    const bytes = readFileSync(path);
    const pageSize = bytes.readUInt16BE(16);
    const leaves: { offset: number; uids: number[] }[] = [];
    for (let offset = pageSize; offset < bytes.length; offset += pageSize) {
      if (bytes[offset] !== 0x0d) continue;
      const text = bytes.subarray(offset, offset + pageSize).toString('latin1');
      const uids = [...new Set([...text.matchAll(/uid-(\d{5})/g)].map((m) => Number(m[1])))];
      if (uids.length > 0) leaves.push({ offset, uids });
    }
    expect(leaves.length).toBeGreaterThan(3);
    const damaged = leaves[Math.floor(leaves.length / 2)];
    if (!damaged) throw new Error('no leaf page');
    bytes.fill(0xff, damaged.offset, damaged.offset + 32);
    writeFileSync(path, bytes);
    const { logger, lines } = captureLogger();

    const store = openCheckpointStore(path, () => NOW, logger);
    for (let n = 0; n < count; n++) {
      const expected = damaged.uids.includes(n) ? undefined : { sec: n + 1, nanos: 0, count: 1 };
      expect(store.load(instance(n)).position).toEqual(expected);
    }
    store.close();
    const lost = damaged.uids.length;
    const error = lines.find((l) => l.level === 50);
    expect(error?.msg).toContain(`salvaged ${String(count - lost)} rows, lost ${String(lost)}`);
    expect(error).toMatchObject({ salvagedRows: count - lost, lostRows: lost, lostExact: true });
    expect(movedAside(dir)).toHaveLength(1);
    // The fresh file is whole: it opens again without a salvage.
    const again = captureLogger();
    openCheckpointStore(path, () => NOW, again.logger).close();
    expect(again.lines.filter((l) => l.level >= 50)).toEqual([]);
  });

  it('moves aside a file with an unknown schema version without reading its rows', () => {
    const dir = tempDir();
    const path = join(dir.path, 'pod-logs.db');
    const db = new Database(path);
    db.pragma('user_version = 99');
    db.close();
    const { logger } = captureLogger();
    openCheckpointStore(path, () => NOW, logger).close();
    expect(movedAside(dir)).toHaveLength(1);
  });
});
