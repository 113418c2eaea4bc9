// Row-by-row salvage of a damaged SQLite file into a fresh one. One bad page should cost the
// rows on that page, not the file: SQLite reports SQLITE_CORRUPT only for the pages a query
// touches, so every row reachable without the bad page can still be read.
import Database from 'better-sqlite3';

/** What the salvage of one table found. */
export interface TableSalvage {
  /** Rows copied into the fresh file. */
  readonly recovered: number;
  /** Rows that could not be read (see `exact`). */
  readonly lost: number;
  /**
   * True when an index of the damaged table still listed its rows, so `lost` counts exactly the
   * rows that existed and could not be read. False: no index could be read either, and `lost`
   * counts the row ids in the damaged range whose lookup failed, an upper bound.
   */
  readonly exact: boolean;
}

export interface SalvageReport {
  readonly tables: Readonly<Record<string, TableSalvage>>;
  readonly recovered: number;
  readonly lost: number;
  readonly exact: boolean;
  /** The damaged file could not be opened or its schema read: nothing recovered, loss unknown. */
  readonly unreadable: boolean;
}

/** Point lookups tried in a damaged range when no index lists its rows. */
const MAX_PROBES = 200_000;
/** Without an index or an upper bound, probing stops after this many row ids in a row give nothing. */
const MISS_RUN_LIMIT = 4096;
/** Column alias for the rowid; tables here never use this name. */
const ROWID = '__salvage_rowid';

const quote = (name: string): string => `"${name.replaceAll('"', '""')}"`;

type Row = Record<string, unknown>;

/**
 * Copies every readable row of every table that both files have (the columns both have) from
 * the file at `damagedPath` into `fresh`, one transaction per table. Never throws for damage in
 * the source; a failure to write `fresh` (full disk) does throw.
 *
 * Per table: a forward scan by rowid up to the first unreadable page, a backward scan down to
 * it, then point lookups of the rows in between, listed by any readable index (each index entry
 * carries its rowid) or, without one, by probing every rowid of the range. Row ids are assumed
 * positive, as SQLite assigns them.
 */
export function salvageInto(damagedPath: string, fresh: Database.Database): SalvageReport {
  let from: Database.Database;
  let tables: string[];
  try {
    from = new Database(damagedPath, { fileMustExist: true });
  } catch {
    return { tables: {}, recovered: 0, lost: 0, exact: false, unreadable: true };
  }
  try {
    tables = from
      .prepare<[], { name: string }>(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'",
      )
      .all()
      .map((row) => row.name);
  } catch {
    from.close();
    return { tables: {}, recovered: 0, lost: 0, exact: false, unreadable: true };
  }
  const freshTables = new Set(tableNames(fresh));
  const report: Record<string, TableSalvage> = {};
  try {
    for (const table of tables.filter((t) => freshTables.has(t))) {
      const freshColumns = new Set(columnsOf(fresh, table));
      const columns = columnsOf(from, table).filter((c) => freshColumns.has(c));
      if (columns.length === 0) continue;
      report[table] = fresh.transaction(() => salvageTable(from, fresh, table, columns))();
    }
  } finally {
    from.close();
  }
  const all = Object.values(report);
  return {
    tables: report,
    recovered: all.reduce((sum, t) => sum + t.recovered, 0),
    lost: all.reduce((sum, t) => sum + t.lost, 0),
    exact: all.every((t) => t.exact),
    unreadable: false,
  };
}

function tableNames(db: Database.Database): string[] {
  return db
    .prepare<[], { name: string }>(
      "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'",
    )
    .all()
    .map((row) => row.name);
}

function columnsOf(db: Database.Database, table: string): string[] {
  try {
    return db
      .prepare<[], { name: string }>(`PRAGMA table_info(${quote(table)})`)
      .all()
      .map((row) => row.name);
  } catch {
    return [];
  }
}

/** Copies rows into one table of the fresh file, each rowid once. */
class TableCopier {
  readonly copied = new Set<number>();
  readonly #insert: Database.Statement;
  readonly #columns: readonly string[];

  constructor(to: Database.Database, table: string, columns: readonly string[]) {
    this.#columns = columns;
    this.#insert = to.prepare(
      `INSERT OR IGNORE INTO ${quote(table)} (${columns.map(quote).join(', ')}) VALUES (${columns.map(() => '?').join(', ')})`,
    );
  }

  /** Copies the row (once) and returns its rowid. */
  copy(row: Row): number {
    const rowid = Number(row[ROWID]);
    if (!this.copied.has(rowid)) {
      this.#insert.run(this.#columns.map((c) => row[c]));
      this.copied.add(rowid);
    }
    return rowid;
  }
}

function salvageTable(
  from: Database.Database,
  to: Database.Database,
  table: string,
  columns: readonly string[],
): TableSalvage {
  const select = `SELECT rowid AS ${ROWID}, ${columns.map(quote).join(', ')} FROM ${quote(table)}`;
  const copier = new TableCopier(to, table, columns);
  const forward = scan(from.prepare<[], Row>(`${select} ORDER BY rowid`), copier, 0);
  if (forward.complete) return { recovered: copier.copied.size, lost: 0, exact: true };
  const low = forward.last ?? 0;
  // The forward scan reached an unreadable page: read from the other end down to it.
  const backward = scan(from.prepare<[], Row>(`${select} ORDER BY rowid DESC`), copier, low);
  const high = backward.last ?? Number.MAX_SAFE_INTEGER;

  const lookup = from.prepare<[number], Row>(`${select} WHERE rowid = ?`);
  const listed = listedRowids(from, table, low, high);
  if (listed !== undefined) {
    const lost = listed.filter((rowid) => !readOne(lookup, rowid, copier)).length;
    return { recovered: copier.copied.size, lost, exact: true };
  }
  const lost = probeRange(lookup, copier, { low, high, bounded: backward.last !== undefined });
  return { recovered: copier.copied.size, lost, exact: false };
}

/**
 * Copies rows from a scan until it ends or fails (or, going down, reaches `stopAt`). Returns
 * the last rowid copied and whether the scan ran to its end.
 */
function scan(
  statement: Database.Statement<[], Row>,
  copier: TableCopier,
  stopAt: number,
): { last: number | undefined; complete: boolean } {
  let last: number | undefined;
  try {
    for (const row of statement.iterate()) {
      if (stopAt > 0 && Number(row[ROWID]) <= stopAt) break;
      last = copier.copy(row);
    }
    return { last, complete: true };
  } catch {
    return { last, complete: false };
  }
}

/** Copies one row by rowid; false if it could not be read (a missing row is not a failure). */
function readOne(
  lookup: Database.Statement<[number], Row>,
  rowid: number,
  copier: TableCopier,
): boolean {
  try {
    const row = lookup.get(rowid);
    if (row) copier.copy(row);
    return true;
  } catch {
    return false;
  }
}

/**
 * Probes every rowid in (low, high) when no index lists them; returns how many lookups failed.
 * Without an upper bound it stops after a long run of ids that give nothing; failed lookups in
 * that trailing run may be ids never used, so they are not counted.
 */
function probeRange(
  lookup: Database.Statement<[number], Row>,
  copier: TableCopier,
  range: { readonly low: number; readonly high: number; readonly bounded: boolean },
): number {
  const { low, high, bounded } = range;
  let lost = 0;
  let sinceSuccess = 0;
  let failedSinceSuccess = 0;
  for (let rowid = low + 1, probes = 0; rowid < high && probes < MAX_PROBES; rowid++, probes++) {
    const before = copier.copied.size;
    if (!readOne(lookup, rowid, copier)) failedSinceSuccess++;
    if (copier.copied.size > before) {
      lost += failedSinceSuccess;
      sinceSuccess = 0;
      failedSinceSuccess = 0;
    } else if (!bounded && ++sinceSuccess >= MISS_RUN_LIMIT) {
      break;
    }
  }
  return bounded ? lost + failedSinceSuccess : lost;
}

/** The rowids in (low, high) listed by the first index of `table` that reads to its end. */
function listedRowids(
  from: Database.Database,
  table: string,
  low: number,
  high: number,
): number[] | undefined {
  let indexes: string[];
  try {
    indexes = from
      .prepare<[string], { name: string }>(
        "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ?",
      )
      .all(table)
      .map((row) => row.name);
  } catch {
    return undefined;
  }
  for (const index of indexes) {
    try {
      // Only the rowid is asked for, so the index alone answers: table pages are not touched.
      return from
        .prepare<[number, number], { r: number }>(
          `SELECT rowid AS r FROM ${quote(table)} INDEXED BY ${quote(index)} WHERE rowid > ? AND rowid < ?`,
        )
        .all(low, high)
        .map((row) => row.r);
    } catch {
      // Damaged too (or not usable for this query): try the next one.
    }
  }
  return undefined;
}
