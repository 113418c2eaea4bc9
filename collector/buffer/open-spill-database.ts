import { existsSync, renameSync } from 'node:fs';
import Database from 'better-sqlite3';
import type { Logger } from 'pino';
import { getErrorMessage } from '../../shared/errors.js';

type SqliteDatabase = Database.Database;

/** Bumped when the table layout changes; a file with another version is moved aside. */
export const SPILL_SCHEMA_VERSION = 1;

export interface OpenSpillDatabaseOptions {
  readonly path: string;
  readonly synchronous: 'normal' | 'full';
  /** Move the current file aside without trying it: it already failed mid-run. */
  readonly forceMoveAside?: boolean;
}

export interface OpenSpillDatabaseDeps {
  readonly logger: Logger;
  readonly now: () => number;
}

export interface OpenedSpillDatabase {
  readonly db: SqliteDatabase;
  /** Where an unreadable previous file was moved, if one was. */
  readonly movedAsidePath?: string;
}

/**
 * Opens (or creates) the spill database. A file that is not a database, is corrupt in a way
 * the opening scan notices, or has an unknown schema version is renamed aside with a timestamp
 * suffix, reported as an error, and replaced by a fresh file: the agent never wedges on its own
 * spill file, and the old file stays on the volume for a human to inspect.
 */
export function openSpillDatabase(
  options: OpenSpillDatabaseOptions,
  deps: OpenSpillDatabaseDeps,
): OpenedSpillDatabase {
  try {
    if (options.forceMoveAside) throw new Error('spill database failed while in use');
    return { db: openAndVerify(options) };
  } catch (err: unknown) {
    const movedAsidePath = moveAside(options.path, deps.now());
    deps.logger.error(
      { err, path: options.path, movedAsidePath },
      `spill database unreadable (${getErrorMessage(err)}): moved aside, starting with an empty one`,
    );
    // A second failure (directory not writable, disk full) is a real fault: let it propagate.
    return { db: openAndVerify(options), movedAsidePath };
  }
}

function openAndVerify(options: OpenSpillDatabaseOptions): SqliteDatabase {
  const db = new Database(options.path);
  try {
    // WAL: one commit per spill batch, readers never block the writer, and a committed batch
    // survives a killed process (it is in the WAL file, replayed by the next open).
    db.pragma('journal_mode = WAL');
    db.pragma(`synchronous = ${options.synchronous === 'full' ? 'FULL' : 'NORMAL'}`);
    const version = db.pragma('user_version', { simple: true });
    if (version !== 0 && version !== SPILL_SCHEMA_VERSION) {
      throw new Error(`unknown spill schema version ${String(version)}`);
    }
    // seq is the global FIFO order across both tiers; (kind, seq) finds the oldest log to drop.
    db.exec(`
      CREATE TABLE IF NOT EXISTS items (
        seq INTEGER PRIMARY KEY,
        id TEXT NOT NULL,
        kind INTEGER NOT NULL,
        bytes INTEGER NOT NULL,
        payload BLOB NOT NULL
      );
      CREATE INDEX IF NOT EXISTS items_kind_seq ON items (kind, seq);
    `);
    db.pragma(`user_version = ${SPILL_SCHEMA_VERSION}`);
    // Reading every row's size walks the whole table once, which surfaces most page corruption
    // here, at open, where moving the file aside is cheap, rather than mid-stream.
    db.prepare('SELECT COUNT(*), SUM(bytes), MAX(seq) FROM items').get();
    return db;
  } catch (err: unknown) {
    db.close();
    throw err;
  }
}

function moveAside(path: string, now: number): string {
  const stamp = new Date(now).toISOString().replace(/[-:]/g, '').replace('.', '');
  const target = `${path}.corrupt-${stamp}`;
  // The WAL and shared-memory files belong to the broken database: they move with it, or the
  // fresh file would try to replay a foreign WAL.
  for (const suffix of ['', '-wal', '-shm']) {
    if (existsSync(path + suffix)) renameSync(path + suffix, target + suffix);
  }
  return target;
}
