import type Database from 'better-sqlite3';
import { openSqliteFile, type OpenedSqliteFile } from '../sqlite/open-sqlite-file.js';
import { SchemaVersionError } from '../sqlite/sqlite-errors.js';
import type { Logger } from 'pino';

/**
 * Bumped when the table layout changes; a file with an unknown version is moved aside.
 * 1: items. 2: items.crc (a checksum per record) and the quarantine table.
 */
export const SPILL_SCHEMA_VERSION = 2;

export interface OpenSpillDatabaseOptions {
  readonly path: string;
  readonly synchronous: 'normal' | 'full';
  /** The file was found damaged in use: salvage it and move it aside without trying it. */
  readonly damagedInUse?: boolean;
}

export interface OpenSpillDatabaseDeps {
  readonly logger: Logger;
  readonly now: () => number;
}

/**
 * Opens (or creates) the spill database with the policy every collector SQLite file shares
 * (collector/sqlite/open-sqlite-file.ts): WAL, and a damaged file salvaged row by row into a
 * fresh one, then moved aside. Throws only when no file can be opened at all.
 */
export function openSpillDatabase(
  options: OpenSpillDatabaseOptions,
  deps: OpenSpillDatabaseDeps,
): OpenedSqliteFile {
  return openSqliteFile(
    {
      path: options.path,
      synchronous: options.synchronous,
      label: 'spill database',
      prepare: prepareSpillSchema,
      damagedInUse: options.damagedInUse ?? false,
    },
    deps,
  );
}

function prepareSpillSchema(db: Database.Database): void {
  const version = db.pragma('user_version', { simple: true });
  if (version !== 0 && version !== 1 && version !== SPILL_SCHEMA_VERSION) {
    throw new SchemaVersionError(`unknown spill schema version ${String(version)}`);
  }
  // seq is the global FIFO order across both tiers; (kind, seq) finds the oldest log to drop.
  // crc is CRC-32 of the id and payload (null in rows written by version 1: not verified).
  // quarantine holds records that failed their checksum or that the gateway could not take.
  db.exec(`
    CREATE TABLE IF NOT EXISTS items (
      seq INTEGER PRIMARY KEY,
      id TEXT NOT NULL,
      kind INTEGER NOT NULL,
      bytes INTEGER NOT NULL,
      payload BLOB NOT NULL,
      crc INTEGER
    );
    CREATE INDEX IF NOT EXISTS items_kind_seq ON items (kind, seq);
    CREATE TABLE IF NOT EXISTS quarantine (
      seq INTEGER PRIMARY KEY,
      id TEXT NOT NULL,
      kind INTEGER NOT NULL,
      bytes INTEGER NOT NULL,
      payload BLOB NOT NULL,
      crc INTEGER,
      reason TEXT NOT NULL,
      at_ms INTEGER NOT NULL
    );
  `);
  const columns = db.prepare<[], { name: string }>('PRAGMA table_info(items)').all();
  if (!columns.some((c) => c.name === 'crc')) db.exec('ALTER TABLE items ADD COLUMN crc INTEGER');
  db.pragma(`user_version = ${String(SPILL_SCHEMA_VERSION)}`);
  // Reading every row's size walks the whole table once, which surfaces most page corruption
  // here, at open, where a salvage is cheap, rather than mid-stream.
  db.prepare('SELECT COUNT(*), SUM(bytes), MAX(seq) FROM items').get();
}
