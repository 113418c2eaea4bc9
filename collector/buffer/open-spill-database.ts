import { existsSync, readdirSync, renameSync, rmSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import Database from 'better-sqlite3';
import type { Logger } from 'pino';
import { getErrorMessage } from '../../shared/errors.js';

type SqliteDatabase = Database.Database;

/** Bumped when the table layout changes; a file with another version is moved aside. */
export const SPILL_SCHEMA_VERSION = 1;

/** The path better-sqlite3 reads as a private in-memory database (no file, nothing to move). */
const IN_MEMORY = ':memory:';
/** Suffix of a moved-aside file, before its UTC timestamp. */
const MOVED_ASIDE_MARK = '.corrupt-';
const COMPANIONS = ['', '-wal', '-shm'] as const;

/** The `code` of a SQLite error (better-sqlite3's SqliteError), e.g. SQLITE_CORRUPT_INDEX. */
export function sqliteCode(err: unknown): string | undefined {
  if (typeof err !== 'object' || err === null || !('code' in err)) return undefined;
  const { code } = err;
  return typeof code === 'string' && code.startsWith('SQLITE_') ? code : undefined;
}

/** A code or one of its extended codes: SQLITE_CORRUPT matches SQLITE_CORRUPT_VTAB. */
const hasCode = (err: unknown, primary: string): boolean => {
  const code = sqliteCode(err);
  return code === primary || code?.startsWith(`${primary}_`) === true;
};

/** A file with a layout this agent does not know: unreadable to it, like a corrupt one. */
export class SpillSchemaError extends Error {
  override readonly name = 'SpillSchemaError';
}

/**
 * Whether the file itself is damaged or foreign, so moving it aside is the fix: SQLITE_CORRUPT,
 * SQLITE_NOTADB (and their extended codes), or an unknown schema version. A full volume, an I/O
 * error or a permission problem is not: the file is fine, and moving it would lose its rows.
 */
export function isCorruption(err: unknown): boolean {
  return (
    err instanceof SpillSchemaError ||
    hasCode(err, 'SQLITE_CORRUPT') ||
    hasCode(err, 'SQLITE_NOTADB')
  );
}

/** Whether SQLite ran out of room: the volume is full (or the file hit max_page_count). */
export function isDiskFull(err: unknown): boolean {
  return hasCode(err, 'SQLITE_FULL');
}

export interface OpenSpillDatabaseOptions {
  readonly path: string;
  readonly synchronous: 'normal' | 'full';
  /** Move the current file aside without trying it: it was found corrupt mid-run. */
  readonly forceMoveAside?: boolean;
}

export interface OpenSpillDatabaseDeps {
  readonly logger: Logger;
  readonly now: () => number;
}

export interface OpenedSpillDatabase {
  readonly db: SqliteDatabase;
  /** Where an unreadable previous file was moved, if one was. */
  readonly movedAsidePath?: string | undefined;
}

/**
 * Opens (or creates) the spill database. A file that is not a database, is corrupt in a way
 * the opening scan notices, or has an unknown schema version is renamed aside with a timestamp
 * suffix, reported as an error, and replaced by a fresh file: the agent never wedges on its own
 * spill file, and the old file stays on the volume for a human to inspect. Only the newest
 * moved-aside file is kept, so repeated corruption cannot fill the volume.
 *
 * Any other failure (the path cannot be opened, the volume is full or read-only, an I/O error)
 * leaves the file where it is and throws, as does a failure to create the fresh file: the
 * caller decides (DurableBuffer runs memory-only).
 */
export function openSpillDatabase(
  options: OpenSpillDatabaseOptions,
  deps: OpenSpillDatabaseDeps,
): OpenedSpillDatabase {
  try {
    if (options.forceMoveAside) throw new SpillSchemaError('spill database found corrupt in use');
    return { db: openAndVerify(options) };
  } catch (err: unknown) {
    if (!isCorruption(err)) throw err;
    const movedAsidePath = moveAside(options.path, deps);
    deps.logger.error(
      { err, path: options.path, movedAsidePath },
      `spill database unreadable (${getErrorMessage(err)}): moved aside, starting with an empty one`,
    );
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
      throw new SpillSchemaError(`unknown spill schema version ${String(version)}`);
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

/**
 * Renames the file and its companions to `<path>.corrupt-<UTC stamp>`, after deleting any file
 * moved aside before: one is enough to inspect, and a volume filling with them would turn
 * corruption into a full disk. Returns the new path (undefined for an in-memory database).
 */
function moveAside(path: string, deps: OpenSpillDatabaseDeps): string | undefined {
  if (path === IN_MEMORY || path === '') return undefined;
  const stamp = new Date(deps.now()).toISOString().replace(/[-:]/g, '').replace('.', '');
  const target = `${path}${MOVED_ASIDE_MARK}${stamp}`;
  removeOlderMovedAside(path, deps.logger);
  // The WAL and shared-memory files belong to the broken database: they move with it, or the
  // fresh file would try to replay a foreign WAL.
  for (const suffix of COMPANIONS) {
    if (existsSync(path + suffix)) renameSync(path + suffix, target + suffix);
  }
  return target;
}

function removeOlderMovedAside(path: string, logger: Logger): void {
  const dir = dirname(path);
  const prefix = basename(path) + MOVED_ASIDE_MARK;
  let names: string[];
  try {
    names = readdirSync(dir).filter((name) => name.startsWith(prefix));
  } catch (err: unknown) {
    logger.warn({ err, dir }, 'could not list earlier moved-aside spill databases');
    return;
  }
  for (const name of names) {
    const old = join(dir, name);
    try {
      rmSync(old, { force: true });
      logger.warn(
        { path: old },
        'deleted an earlier moved-aside spill database (only the newest is kept)',
      );
    } catch (err: unknown) {
      logger.warn({ err, path: old }, 'could not delete an earlier moved-aside spill database');
    }
  }
}
