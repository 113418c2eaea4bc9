import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { makeTempDir, type TempDir } from '../../test/helpers/buffer-test-support.js';
import { salvageInto } from './salvage.js';

const dirs: TempDir[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) dir.remove();
});

const SCHEMA = 'CREATE TABLE t (n INTEGER NOT NULL, label TEXT NOT NULL)';

/** A file with `count` rows and no index at all, and the rows held by one of its middle leaves. */
function damagedFile(count: number): { path: string; onPage: number[] } {
  const dir = makeTempDir('kubexa-salvage-');
  dirs.push(dir);
  const path = join(dir.path, 'damaged.db');
  const db = new Database(path);
  db.exec(SCHEMA);
  const insert = db.prepare('INSERT INTO t VALUES (?, ?)');
  db.transaction(() => {
    for (let n = 1; n <= count; n++) insert.run(n, `row-${String(n).padStart(5, '0')}`);
  })();
  db.close();
  const bytes = readFileSync(path);
  const pageSize = bytes.readUInt16BE(16);
  const leaves: { offset: number; rows: number[] }[] = [];
  for (let offset = pageSize; offset < bytes.length; offset += pageSize) {
    if (bytes[offset] !== 0x0d) continue;
    const text = bytes.subarray(offset, offset + pageSize).toString('latin1');
    leaves.push({ offset, rows: [...text.matchAll(/row-(\d{5})/g)].map((m) => Number(m[1])) });
  }
  const damaged = leaves[Math.floor(leaves.length / 2)];
  if (!damaged) throw new Error('no leaf page');
  bytes.fill(0xff, damaged.offset, damaged.offset + 32);
  writeFileSync(path, bytes);
  return { path, onPage: damaged.rows };
}

describe('salvageInto', () => {
  it('without any index, probes the damaged range row by row and bounds what it lost', () => {
    const count = 3000;
    const { path, onPage } = damagedFile(count);
    expect(onPage.length).toBeGreaterThan(10);
    const fresh = new Database(':memory:');
    fresh.exec(SCHEMA);

    const report = salvageInto(path, fresh);

    expect(report).toMatchObject({ recovered: count - onPage.length, exact: false });
    expect(report.unreadable).toBe(false);
    // Row ids here are dense, so the bound is the count.
    expect(report.lost).toBe(onPage.length);
    const copied = fresh.prepare<[], { n: number }>('SELECT n FROM t ORDER BY n').all();
    const expected = Array.from({ length: count }, (_, i) => i + 1).filter(
      (n) => !onPage.includes(n),
    );
    expect(copied.map((row) => row.n)).toEqual(expected);
  });

  it('reports a file that is not a database as unreadable, and copies nothing', () => {
    const dir = makeTempDir('kubexa-salvage-');
    dirs.push(dir);
    const path = join(dir.path, 'garbage.db');
    writeFileSync(path, 'not a database at all, '.repeat(300));
    const fresh = new Database(':memory:');
    fresh.exec(SCHEMA);
    expect(salvageInto(path, fresh)).toEqual({
      tables: {},
      recovered: 0,
      lost: 0,
      exact: false,
      unreadable: true,
    });
  });
});
