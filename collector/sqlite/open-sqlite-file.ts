// The one way the collector opens its SQLite files (the buffer's spill file and the pod-log
// checkpoint file): WAL, a chosen synchronous mode, and one corruption policy. A damaged file
// never stops the collector: what can be read is salvaged row by row into a fresh file, the
// damaged one is moved aside for a human, and the collector starts. See docs/buffer.md.
import { existsSync, readdirSync, renameSync, rmSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import Database from 'better-sqlite3';
import type { Logger } from 'pino';
import { getErrorMessage } from '../../shared/errors.js';
import { salvageInto, type SalvageReport } from './salvage.js';
import { isCorruption, isDamage, SchemaVersionError } from './sqlite-errors.js';

/** The path better-sqlite3 reads as a private in-memory database (no file, nothing to move). */
const IN_MEMORY = ':memory:';
/** Suffix of a moved-aside file, before its UTC timestamp. */
const MOVED_ASIDE_MARK = '.corrupt-';
/** Suffix of the fresh file a salvage writes before it takes the damaged file's place. */
const SALVAGE_SUFFIX = '.salvage';
const COMPANIONS = ['', '-wal', '-shm'] as const;

export interface SqliteFileOptions {
  readonly path: string;
  readonly synchronous: 'normal' | 'full';
  /** What the file is, for log lines: "spill database", "checkpoint database". */
  readonly label: string;
  /**
   * Creates or migrates the schema and reads what must be readable, on an open WAL handle.
   * Throws SchemaVersionError for a version it does not know, or SQLite's own error.
   */
  readonly prepare: (db: Database.Database) => void;
  /** The file was found damaged in use: salvage and move it aside without trying it first. */
  readonly damagedInUse?: boolean;
}

export interface SqliteFileDeps {
  readonly logger: Logger;
  readonly now: () => number;
}

export interface OpenedSqliteFile {
  readonly db: Database.Database;
  /** Where an unreadable previous file was moved, if one was. */
  readonly movedAsidePath?: string | undefined;
  /** What a salvage of the previous file recovered and lost, if one ran. */
  readonly salvage?: SalvageReport | undefined;
}

/**
 * Opens (or creates) a SQLite file in WAL mode and runs `prepare` on it.
 *
 * A file that is damaged (SQLITE_CORRUPT, SQLITE_NOTADB) is salvaged: every readable row is
 * copied into a fresh file, the damaged file and its -wal/-shm are renamed to
 * `<path>.corrupt-<UTC stamp>`, and the fresh file takes its place; one `error` line gives the
 * counts. A file with an unknown schema version is moved aside without a salvage (its rows mean
 * something else). Only the newest moved-aside file is kept, so repeated damage cannot fill
 * the volume.
 *
 * Any other failure (the path cannot be opened, the volume is full or read-only, an I/O error)
 * leaves the file where it is and throws, as does a failure to create the fresh file: the
 * caller decides (the buffer runs memory-only, the pod-log source without checkpoints).
 */
export function openSqliteFile(options: SqliteFileOptions, deps: SqliteFileDeps): OpenedSqliteFile {
  adoptInterruptedSalvage(options.path, deps.logger, options.label);
  if (options.damagedInUse === true) {
    return recover(options, deps, new Error(`${options.label} found damaged in use`));
  }
  try {
    return { db: openAndPrepare(options) };
  } catch (err: unknown) {
    if (!isCorruption(err)) throw err;
    return recover(options, deps, err);
  }
}

/** Salvages what it can (not for a foreign schema), moves the damaged file aside, opens anew. */
function recover(
  options: SqliteFileOptions,
  deps: SqliteFileDeps,
  cause: unknown,
): OpenedSqliteFile {
  if (options.path === IN_MEMORY || options.path === '') return { db: openAndPrepare(options) };
  const salvage =
    cause instanceof SchemaVersionError ? undefined : salvageToSide(options, deps, cause);
  const movedAsidePath = moveAside(options.path, deps, options.label);
  if (salvage) renameSync(options.path + SALVAGE_SUFFIX, options.path);
  deps.logger.error(
    {
      err: cause,
      path: options.path,
      movedAsidePath,
      salvagedRows: salvage?.recovered ?? 0,
      lostRows: salvage?.lost,
      lostExact: salvage?.exact ?? false,
    },
    `${options.label} unreadable (${getErrorMessage(cause)}): ${describeSalvage(salvage)}; damaged file moved aside`,
  );
  return { db: openAndPrepare(options), movedAsidePath, salvage };
}

function describeSalvage(salvage: SalvageReport | undefined): string {
  if (!salvage) return 'nothing salvaged';
  const bound = salvage.exact ? '' : 'at most ';
  return `salvaged ${String(salvage.recovered)} rows, lost ${bound}${String(salvage.lost)}`;
}

function openAndPrepare(options: SqliteFileOptions): Database.Database {
  const db = new Database(options.path);
  try {
    // WAL: one commit per write batch, readers never block the writer, and a committed batch
    // survives a killed process (it is in the WAL file, replayed by the next open).
    db.pragma('journal_mode = WAL');
    db.pragma(`synchronous = ${options.synchronous === 'full' ? 'FULL' : 'NORMAL'}`);
    options.prepare(db);
    return db;
  } catch (err: unknown) {
    db.close();
    throw err;
  }
}

/**
 * Writes every readable row of the damaged file into `<path>.salvage`, closed and complete.
 * Undefined when that fails (the volume is full, say): the damaged file is then only moved.
 */
function salvageToSide(
  options: SqliteFileOptions,
  deps: SqliteFileDeps,
  cause: unknown,
): SalvageReport | undefined {
  const side = options.path + SALVAGE_SUFFIX;
  removeWithCompanions(side);
  if (!isDamage(cause) && options.damagedInUse !== true) return undefined;
  let fresh: Database.Database | undefined;
  try {
    fresh = openAndPrepare({ ...options, path: side });
    const report = salvageInto(options.path, fresh);
    // Closing the last connection checkpoints the WAL into the file: one file to rename.
    fresh.close();
    fresh = undefined;
    if (!report.unreadable) return report;
    removeWithCompanions(side);
    return undefined;
  } catch (err: unknown) {
    fresh?.close();
    removeWithCompanions(side);
    deps.logger.error({ err, path: options.path }, `${options.label}: salvage failed`);
    return undefined;
  }
}

/**
 * A salvage moves the damaged file aside, then renames the fresh one into place. A crash
 * between the two leaves the fresh file alone: take it.
 */
function adoptInterruptedSalvage(path: string, logger: Logger, label: string): void {
  if (path === IN_MEMORY || path === '' || existsSync(path)) return;
  if (!existsSync(path + SALVAGE_SUFFIX)) return;
  renameSync(path + SALVAGE_SUFFIX, path);
  logger.warn({ path }, `${label}: finished an interrupted salvage`);
}

function removeWithCompanions(path: string): void {
  for (const suffix of COMPANIONS) rmSync(path + suffix, { force: true });
}

/**
 * Renames the file and its companions to `<path>.corrupt-<UTC stamp>`, after deleting any file
 * moved aside before: one is enough to inspect, and a volume filling with them would turn
 * corruption into a full disk. Returns the new path.
 */
function moveAside(path: string, deps: SqliteFileDeps, label: string): string {
  const stamp = new Date(deps.now()).toISOString().replace(/[-:]/g, '').replace('.', '');
  const target = `${path}${MOVED_ASIDE_MARK}${stamp}`;
  removeOlderMovedAside(path, deps.logger, label);
  // The WAL and shared-memory files belong to the broken database: they move with it, or the
  // fresh file would try to replay a foreign WAL.
  for (const suffix of COMPANIONS) {
    if (existsSync(path + suffix)) renameSync(path + suffix, target + suffix);
  }
  return target;
}

function removeOlderMovedAside(path: string, logger: Logger, label: string): void {
  const dir = dirname(path);
  const prefix = basename(path) + MOVED_ASIDE_MARK;
  let names: string[];
  try {
    names = readdirSync(dir).filter((name) => name.startsWith(prefix));
  } catch (err: unknown) {
    logger.warn({ err, dir }, `could not list earlier moved-aside ${label} files`);
    return;
  }
  for (const name of names) {
    const old = join(dir, name);
    try {
      rmSync(old, { force: true });
      logger.warn(
        { path: old },
        `deleted an earlier moved-aside ${label} (only the newest is kept)`,
      );
    } catch (err: unknown) {
      logger.warn({ err, path: old }, `could not delete an earlier moved-aside ${label}`);
    }
  }
}
