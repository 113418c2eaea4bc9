import type Database from 'better-sqlite3';
import type {
  FollowedContainer,
  LevelNumber,
  LogFacets,
  LogFilter,
  LogLine,
  LogPage,
  LogStats,
} from './api-types.js';
import { LEVEL_NAMES } from './api-types.js';

/** A log record to store; seq is assigned by the store. */
export type NewLogLine = Omit<LogLine, 'seq'>;

interface LogRow {
  seq: number;
  kind: string;
  session_id: string;
  time_ms: number;
  received_at: number;
  namespace: string;
  pod: string;
  container: string;
  workload: string;
  workload_kind: string;
  node: string;
  level: number;
  message: string;
  raw: string | null;
  line_count: number;
  truncated: number;
}

const COLUMNS = `seq, kind, session_id, time_ms, received_at, namespace, pod, container, workload,
  workload_kind, node, level, message, raw, line_count, truncated`;

const toLine = (row: LogRow): LogLine => ({
  seq: row.seq,
  kind: row.kind === 'rate-limited' ? 'rate-limited' : 'line',
  sessionId: row.session_id,
  timeMs: row.time_ms,
  receivedAt: row.received_at,
  namespace: row.namespace,
  pod: row.pod,
  container: row.container,
  workload: row.workload,
  workloadKind: row.workload_kind,
  node: row.node,
  level: (row.level >= 0 && row.level <= 4 ? row.level : 0) as LevelNumber,
  message: row.message,
  raw: row.raw ?? row.message,
  lineCount: row.line_count,
  truncated: row.truncated === 1,
});

/** Pages are at most this long; the UI asks for 200. */
export const MAX_PAGE = 1000;
/** Facet lists stop growing here: a dropdown of more pods than this is no help. */
const MAX_FACET_VALUES = 2000;
const RATE_WINDOW_S = 10;
const FOLLOWED_WINDOW_MS = 5 * 60_000;

/** The filter columns, each with its own (column, seq) index. */
const EQUALITY_FILTERS = ['namespace', 'workload', 'pod', 'container'] as const;

export const LOG_SCHEMA = `
  CREATE TABLE IF NOT EXISTS log_lines (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    message_id TEXT NOT NULL,
    idx INTEGER NOT NULL,
    kind TEXT NOT NULL,
    session_id TEXT NOT NULL,
    time_ms INTEGER NOT NULL,
    received_at INTEGER NOT NULL,
    namespace TEXT NOT NULL,
    pod TEXT NOT NULL,
    container TEXT NOT NULL,
    workload TEXT NOT NULL,
    workload_kind TEXT NOT NULL,
    node TEXT NOT NULL,
    level INTEGER NOT NULL,
    message TEXT NOT NULL,
    -- NULL when the record is one line (raw = message): half the bytes for most logs.
    raw TEXT,
    line_count INTEGER NOT NULL,
    truncated INTEGER NOT NULL
  );
  CREATE INDEX IF NOT EXISTS log_lines_namespace ON log_lines (namespace, seq);
  CREATE INDEX IF NOT EXISTS log_lines_workload ON log_lines (workload, seq);
  CREATE INDEX IF NOT EXISTS log_lines_pod ON log_lines (pod, seq);
  CREATE INDEX IF NOT EXISTS log_lines_container ON log_lines (container, seq);
  CREATE INDEX IF NOT EXISTS log_lines_level ON log_lines (level, seq);
  CREATE INDEX IF NOT EXISTS log_lines_namespace_level ON log_lines (namespace, level, seq);
`;

/**
 * Free text: a trigram index over each record's text (raw, or message when raw is the same),
 * rowid = log_lines.seq. Contentless: the text is stored once, in log_lines. A search reads the
 * index newest first and re-checks each candidate with the LIKE it always used, so the answer
 * is exactly the LIKE's (the index only finds candidates faster; its Unicode case folding finds
 * a superset of what LIKE's ASCII folding matches).
 */
export const LOG_TEXT_SCHEMA = `
  CREATE VIRTUAL TABLE IF NOT EXISTS log_text
    USING fts5(text, content='', contentless_delete=1, tokenize='trigram');
`;

/** The trigram index needs three characters; a shorter text is matched by the LIKE alone. */
const MIN_INDEXED_TEXT_CHARS = 3;
/**
 * A text found in at least this many records is common: the LIKE scan, newest first, fills a
 * page after a few hundred rows, while the index would walk its long lists backwards (seconds
 * for a text in every record). Below it the index's candidates are few, whatever the page.
 */
export const COMMON_TEXT_RECORDS = 2000;

/** An FTS5 string: the text as one phrase, so every character is literal. */
const ftsPhrase = (text: string): string => `"${text.replace(/"/g, '""')}"`;

/** The level names a filter accepts, comma-separated ("warn,error"); throws on an unknown one. */
export function parseLevels(value: string): number[] {
  return value
    .split(',')
    .map((name) => name.trim().toLowerCase())
    .filter((name) => name !== '')
    .map((name) => {
      const level = name === 'unknown' ? 0 : LEVEL_NAMES.indexOf(name);
      if (level <= 0 && name !== 'unknown') {
        throw new Error(`level: unknown level "${name}" (use debug, info, warn, error or unknown)`);
      }
      return level;
    });
}

/** `%` and `_` in the user's text match themselves. */
const likePattern = (text: string): string => `%${text.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;

interface Where {
  readonly sql: string;
  readonly params: (string | number)[];
}

function whereOf(filter: LogFilter): Where {
  const clauses: string[] = [];
  const params: (string | number)[] = [];
  for (const column of EQUALITY_FILTERS) {
    const value = filter[column];
    if (value === undefined || value === '') continue;
    clauses.push(`${column} = ?`);
    params.push(value);
  }
  if (filter.level !== undefined && filter.level !== '') {
    const levels = parseLevels(filter.level);
    if (levels.length > 0) {
      clauses.push(`level IN (${levels.map(() => '?').join(', ')})`);
      params.push(...levels);
    }
  }
  if (filter.text !== undefined && filter.text !== '') {
    clauses.push(`COALESCE(raw, message) LIKE ? ESCAPE '\\'`);
    params.push(likePattern(filter.text));
  }
  return { sql: clauses.join(' AND '), params };
}

/** Whether a text filter is served by the trigram index. */
const usesTextIndex = (filter: LogFilter): boolean =>
  filter.text !== undefined &&
  // Code points, as the trigram tokenizer counts them (an emoji is one character to it).
  // eslint-disable-next-line @typescript-eslint/no-misused-spread
  [...filter.text].length >= MIN_INDEXED_TEXT_CHARS;

/**
 * The page's SELECT: over log_lines by seq, or, for an indexed text, driven by the trigram
 * index newest first (its rowid is the seq), the LIKE of whereOf re-checking each candidate.
 */
function pageQuery(
  filter: LogFilter,
  columns: string,
  page: { limit: number; before?: number | undefined; after?: number | undefined },
  indexed: boolean,
): { sql: string; params: (string | number)[] } {
  const where = whereOf(filter);
  const seq = indexed ? 'log_text.rowid' : 'seq';
  const clauses = where.sql === '' ? [] : [where.sql];
  const params: (string | number)[] = [];
  if (indexed) {
    clauses.unshift('log_text MATCH ?');
    params.push(ftsPhrase(filter.text ?? ''));
  }
  params.push(...where.params);
  if (page.before !== undefined) {
    clauses.push(`${seq} < ?`);
    params.push(page.before);
  }
  if (page.after !== undefined) {
    clauses.push(`${seq} > ?`);
    params.push(page.after);
  }
  const from = indexed ? 'log_text JOIN log_lines ON log_lines.seq = log_text.rowid' : 'log_lines';
  const sql = `SELECT ${columns} FROM ${from} ${clauses.length > 0 ? `WHERE ${clauses.join(' AND ')}` : ''}
      ORDER BY ${seq} DESC LIMIT ${page.limit}`;
  return { sql, params };
}

/**
 * The log records the demo gateway received, one row per LogEntry, with an index per filter
 * column so a filtered page reads only matching rows, newest first.
 */
export class LogStore {
  readonly #db: Database.Database;
  readonly #insert: Database.Statement;
  readonly #insertText: Database.Statement<[number | bigint, string]>;
  readonly #countText: Database.Statement<[string], { n: number }>;
  readonly #facets = {
    namespace: new Set<string>(),
    workload: new Set<string>(),
    pod: new Set<string>(),
    container: new Set<string>(),
  };
  /** Lines received per second, the last RATE_WINDOW_S seconds (keyed by unix second). */
  readonly #perSecond = new Map<number, number>();
  readonly #followed = new Map<string, FollowedContainer>();
  #total: number;

  constructor(db: Database.Database) {
    this.#db = db;
    db.exec(LOG_SCHEMA);
    const hadTextIndex =
      db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'log_text'").get() !==
      undefined;
    db.exec(LOG_TEXT_SCHEMA);
    // A store file written before the text index existed: its records are indexed once, now.
    if (!hadTextIndex) {
      db.exec(
        'INSERT INTO log_text (rowid, text) SELECT seq, COALESCE(raw, message) FROM log_lines',
      );
    }
    this.#insertText = db.prepare('INSERT INTO log_text (rowid, text) VALUES (?, ?)');
    this.#countText = db.prepare(
      `SELECT COUNT(*) AS n FROM (SELECT 1 FROM log_text WHERE log_text MATCH ? LIMIT ${COMMON_TEXT_RECORDS})`,
    );
    this.#insert = db.prepare(
      `INSERT INTO log_lines (message_id, idx, kind, session_id, time_ms, received_at,
         namespace, pod, container, workload, workload_kind, node, level, message, raw,
         line_count, truncated)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    );
    for (const column of EQUALITY_FILTERS) {
      const rows = db
        .prepare<[], { v: string }>(
          `SELECT DISTINCT ${column} AS v FROM log_lines ORDER BY v LIMIT ${MAX_FACET_VALUES}`,
        )
        .all();
      for (const row of rows) this.#facets[column].add(row.v);
    }
    this.#total =
      db.prepare<[], { n: number }>('SELECT COUNT(*) AS n FROM log_lines').get()?.n ?? 0;
  }

  /**
   * Inside the caller's transaction, only for a message stored for the first time: the messages
   * table's unique message_id is what keeps a redelivered batch from being stored twice.
   */
  insertLines(messageId: string, lines: readonly NewLogLine[]): void {
    lines.forEach((line, idx) => {
      const { changes, lastInsertRowid } = this.#insert.run(
        messageId,
        idx,
        line.kind,
        line.sessionId,
        line.timeMs,
        line.receivedAt,
        line.namespace,
        line.pod,
        line.container,
        line.workload,
        line.workloadKind,
        line.node,
        line.level,
        line.message,
        line.raw === line.message ? null : line.raw,
        line.lineCount,
        line.truncated ? 1 : 0,
      );
      if (changes !== 1) return;
      this.#insertText.run(lastInsertRowid, line.raw);
      this.#count(line);
    });
  }

  #count(line: NewLogLine): void {
    this.#total++;
    const second = Math.floor(line.receivedAt / 1000);
    this.#perSecond.set(second, (this.#perSecond.get(second) ?? 0) + 1);
    if (line.kind !== 'line') return;
    for (const column of EQUALITY_FILTERS) {
      const facet = this.#facets[column];
      if (line[column] !== '' && facet.size < MAX_FACET_VALUES) facet.add(line[column]);
    }
    const key = `${line.namespace}/${line.pod}/${line.container}`;
    const seen = this.#followed.get(key);
    this.#followed.set(key, {
      namespace: line.namespace,
      pod: line.pod,
      container: line.container,
      workload: line.workload,
      lastLineAt: line.receivedAt,
      lines: (seen?.lines ?? 0) + 1,
    });
  }

  /**
   * A page of matching records, oldest first: the newest `limit` before `before` (older pages),
   * or the newest `limit` after `after` (follow).
   */
  query(
    filter: LogFilter,
    page: { limit: number; before?: number | undefined; after?: number | undefined },
  ): LogPage {
    const limit = Math.max(1, Math.min(MAX_PAGE, Math.floor(page.limit)));
    const { sql, params } = pageQuery(
      filter,
      COLUMNS,
      { ...page, limit: limit + 1 },
      this.#rareText(filter),
    );
    const rows = this.#db.prepare<(string | number)[], LogRow>(sql).all(...params);
    const hasOlder = rows.length > limit;
    return {
      lines: rows.slice(0, limit).reverse().map(toLine),
      hasOlder,
      newestSeq: this.newestSeq(),
    };
  }

  /** The query plan of a filter, for tests that an index serves it. */
  plan(filter: LogFilter): string[] {
    const { sql, params } = pageQuery(filter, 'seq', { limit: 201 }, this.#rareText(filter));
    return this.#db
      .prepare<(string | number)[], { detail: string }>(`EXPLAIN QUERY PLAN ${sql}`)
      .all(...params)
      .map((r) => r.detail);
  }

  /** An indexed text found in fewer than COMMON_TEXT_RECORDS records: the index serves it. */
  #rareText(filter: LogFilter): boolean {
    if (!usesTextIndex(filter)) return false;
    const found = this.#countText.get(ftsPhrase(filter.text ?? ''))?.n ?? 0;
    return found < COMMON_TEXT_RECORDS;
  }

  newestSeq(): number {
    return (
      this.#db.prepare<[], { s: number | null }>('SELECT MAX(seq) AS s FROM log_lines').get()?.s ??
      0
    );
  }

  facets(): LogFacets {
    const sorted = (set: Set<string>): string[] => [...set].sort();
    return {
      namespaces: sorted(this.#facets.namespace),
      workloads: sorted(this.#facets.workload),
      pods: sorted(this.#facets.pod),
      containers: sorted(this.#facets.container),
    };
  }

  stats(now: number): LogStats {
    const current = Math.floor(now / 1000);
    let recent = 0;
    for (const [second, n] of this.#perSecond) {
      if (second <= current - RATE_WINDOW_S) this.#perSecond.delete(second);
      else recent += n;
    }
    const containers = [...this.#followed.values()]
      .filter((c) => now - c.lastLineAt <= FOLLOWED_WINDOW_MS)
      .sort((a, b) => b.lastLineAt - a.lastLineAt);
    return {
      linesPerSecond: Math.round((recent / RATE_WINDOW_S) * 10) / 10,
      totalLines: this.#total,
      containers,
    };
  }
}
