import type Database from 'better-sqlite3';
import { ITEM_KINDS, type ItemKind } from './types.js';

/** One row of the spill table. */
export interface SpillRow {
  readonly seq: number;
  readonly id: string;
  readonly kind: ItemKind;
  readonly bytes: number;
  readonly payload: Uint8Array;
}

interface RawRow {
  seq: number;
  id: string;
  kind: number;
  bytes: number;
  payload: Buffer;
}

interface RawRef {
  seq: number;
  bytes: number;
}

/** Totals of the table, read once at open. */
export interface SpillTotals {
  readonly count: number;
  readonly bytes: number;
  readonly maxSeq: number;
}

const kindCode = (kind: ItemKind): number => ITEM_KINDS.indexOf(kind);
function kindOf(code: number): ItemKind {
  // An out-of-range code can only come from a foreign writer: treat it as the most protected
  // kind, so the overflow policy never drops it silently as a log.
  return ITEM_KINDS[code] ?? 'state';
}
const toRow = (raw: RawRow): SpillRow => ({
  seq: raw.seq,
  id: raw.id,
  kind: kindOf(raw.kind),
  bytes: raw.bytes,
  payload: raw.payload,
});

/**
 * The SQL of the disk tier on an open database, every write in one transaction. It knows
 * nothing of tiers or policy; DurableBuffer decides what goes where.
 */
export class SpillStore {
  readonly #db: Database.Database;
  readonly #insert: Database.Statement<[number, string, number, number, Uint8Array]>;
  readonly #readAfter: Database.Statement<[number, number], RawRow>;
  readonly #readOne: Database.Statement<[number], { payload: Buffer }>;
  readonly #delete: Database.Statement<[number]>;
  readonly #oldestOfKind: Database.Statement<[number, number, number], RawRef>;
  readonly #insertMany: (rows: readonly SpillRow[]) => void;
  readonly #deleteMany: (seqs: readonly number[]) => number;

  constructor(db: Database.Database) {
    this.#db = db;
    this.#insert = db.prepare(
      'INSERT INTO items (seq, id, kind, bytes, payload) VALUES (?, ?, ?, ?, ?)',
    );
    this.#readAfter = db.prepare(
      'SELECT seq, id, kind, bytes, payload FROM items WHERE seq > ? ORDER BY seq LIMIT ?',
    );
    this.#readOne = db.prepare('SELECT payload FROM items WHERE seq = ?');
    this.#delete = db.prepare('DELETE FROM items WHERE seq = ?');
    this.#oldestOfKind = db.prepare(
      'SELECT seq, bytes FROM items WHERE kind = ? AND seq > ? ORDER BY seq LIMIT ?',
    );
    this.#insertMany = db.transaction((rows: readonly SpillRow[]) => {
      for (const row of rows) {
        this.#insert.run(row.seq, row.id, kindCode(row.kind), row.bytes, row.payload);
      }
    });
    this.#deleteMany = db.transaction((seqs: readonly number[]) => {
      let deleted = 0;
      for (const seq of seqs) deleted += this.#delete.run(seq).changes;
      return deleted;
    });
  }

  totals(): SpillTotals {
    const row = this.#db
      .prepare<[], { count: number; bytes: number | null; maxSeq: number | null }>(
        'SELECT COUNT(*) AS count, SUM(bytes) AS bytes, MAX(seq) AS maxSeq FROM items',
      )
      .get();
    return { count: row?.count ?? 0, bytes: row?.bytes ?? 0, maxSeq: row?.maxSeq ?? 0 };
  }

  insert(rows: readonly SpillRow[]): void {
    if (rows.length > 0) this.#insertMany(rows);
  }

  /** Up to `limit` rows with seq > `afterSeq`, oldest first. */
  readAfter(afterSeq: number, limit: number): SpillRow[] {
    return this.#readAfter.all(afterSeq, limit).map(toRow);
  }

  readPayload(seq: number): Uint8Array | undefined {
    return this.#readOne.get(seq)?.payload;
  }

  /** Deletes rows by seq in one transaction; returns how many existed. */
  delete(seqs: readonly number[]): number {
    return seqs.length > 0 ? this.#deleteMany(seqs) : 0;
  }

  /**
   * The oldest rows of `kind` with seq > `afterSeq` whose sizes add up to at least `bytes`
   * (fewer if the table runs out). Read in pages so a large deficit is not one huge query.
   */
  oldestOfKind(kind: ItemKind, afterSeq: number, bytes: number): RawRef[] {
    const picked: RawRef[] = [];
    let total = 0;
    let cursor = afterSeq;
    while (total < bytes) {
      const page = this.#oldestOfKind.all(kindCode(kind), cursor, 256);
      for (const ref of page) {
        if (total >= bytes) break;
        picked.push(ref);
        total += ref.bytes;
        cursor = ref.seq;
      }
      if (page.length < 256) break;
    }
    return picked;
  }

  close(): void {
    this.#db.close();
  }
}
