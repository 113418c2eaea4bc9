import type Database from 'better-sqlite3';
import { recordChecksum } from './record-checksum.js';
import { ITEM_KINDS, type ItemKind } from './types.js';

/** Quarantined records kept for inspection; older ones are deleted as new ones arrive. */
export const QUARANTINE_MAX_ROWS = 1000;

/** One row of the spill table. */
export interface SpillRow {
  readonly seq: number;
  readonly id: string;
  readonly kind: ItemKind;
  readonly bytes: number;
  readonly payload: Uint8Array;
}

/** A row read back, with the verdict of its checksum. */
export interface ReadRow extends SpillRow {
  /** False: the stored checksum does not match the id and payload read (the record is damaged). */
  readonly intact: boolean;
}

interface RawRow {
  seq: number;
  id: string;
  kind: number;
  bytes: number;
  payload: Buffer;
  crc: number | null;
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
/** A row written before checksums existed (crc null) is taken as it is. */
const intact = (raw: { id: string; payload: Buffer; crc: number | null }): boolean =>
  raw.crc === null || recordChecksum(raw.id, raw.payload) === raw.crc;
const toRow = (raw: RawRow): ReadRow => ({
  seq: raw.seq,
  id: raw.id,
  kind: kindOf(raw.kind),
  bytes: raw.bytes,
  payload: raw.payload,
  intact: intact(raw),
});

/**
 * The SQL of the disk tier on an open database, every write in one transaction. It knows
 * nothing of tiers or policy; DurableBuffer decides what goes where.
 */
export class SpillStore {
  readonly #db: Database.Database;
  readonly #insert: Database.Statement<[number, string, number, number, Uint8Array, number]>;
  readonly #readAfter: Database.Statement<[number, number], RawRow>;
  readonly #readOne: Database.Statement<
    [number],
    { id: string; payload: Buffer; crc: number | null }
  >;
  readonly #delete: Database.Statement<[number]>;
  readonly #oldestOfKind: Database.Statement<[number, number, number], RawRef>;
  readonly #insertMany: (rows: readonly SpillRow[]) => void;
  readonly #deleteMany: (seqs: readonly number[]) => number;
  readonly #quarantineRow: (seq: number, reason: string, atMs: number) => boolean;
  readonly #quarantineItem: (row: SpillRow, reason: string, atMs: number) => void;

  constructor(db: Database.Database) {
    this.#db = db;
    this.#insert = db.prepare(
      'INSERT INTO items (seq, id, kind, bytes, payload, crc) VALUES (?, ?, ?, ?, ?, ?)',
    );
    this.#readAfter = db.prepare(
      'SELECT seq, id, kind, bytes, payload, crc FROM items WHERE seq > ? ORDER BY seq LIMIT ?',
    );
    this.#readOne = db.prepare('SELECT id, payload, crc FROM items WHERE seq = ?');
    this.#delete = db.prepare('DELETE FROM items WHERE seq = ?');
    this.#oldestOfKind = db.prepare(
      'SELECT seq, bytes FROM items WHERE kind = ? AND seq > ? ORDER BY seq LIMIT ?',
    );
    this.#insertMany = db.transaction((rows: readonly SpillRow[]) => {
      for (const row of rows) {
        const crc = recordChecksum(row.id, row.payload);
        this.#insert.run(row.seq, row.id, kindCode(row.kind), row.bytes, row.payload, crc);
      }
    });
    this.#deleteMany = db.transaction((seqs: readonly number[]) => {
      let deleted = 0;
      for (const seq of seqs) deleted += this.#delete.run(seq).changes;
      return deleted;
    });
    const moveToQuarantine = db.prepare<[string, number, number]>(
      `INSERT OR REPLACE INTO quarantine (seq, id, kind, bytes, payload, crc, reason, at_ms)
       SELECT seq, id, kind, bytes, payload, crc, ?, ? FROM items WHERE seq = ?`,
    );
    const insertQuarantine = db.prepare<
      [number, string, number, number, Uint8Array, number, string, number]
    >('INSERT OR REPLACE INTO quarantine VALUES (?, ?, ?, ?, ?, ?, ?, ?)');
    // Bounded: a gateway that refuses everything must not turn the quarantine into a full disk.
    const prune = db.prepare(
      `DELETE FROM quarantine WHERE seq NOT IN
         (SELECT seq FROM quarantine ORDER BY seq DESC LIMIT ${String(QUARANTINE_MAX_ROWS)})`,
    );
    this.#quarantineRow = db.transaction((seq: number, reason: string, atMs: number) => {
      const moved = moveToQuarantine.run(reason, atMs, seq).changes > 0;
      this.#delete.run(seq);
      prune.run();
      return moved;
    });
    this.#quarantineItem = db.transaction((row: SpillRow, reason: string, atMs: number) => {
      const crc = recordChecksum(row.id, row.payload);
      insertQuarantine.run(
        row.seq,
        row.id,
        kindCode(row.kind),
        row.bytes,
        row.payload,
        crc,
        reason,
        atMs,
      );
      prune.run();
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

  /** Up to `limit` rows with seq > `afterSeq`, oldest first, each with its checksum verdict. */
  readAfter(afterSeq: number, limit: number): ReadRow[] {
    return this.#readAfter.all(afterSeq, limit).map(toRow);
  }

  /** The payload of one row and its checksum verdict; undefined if the row is gone. */
  readPayload(seq: number): { payload: Uint8Array; intact: boolean } | undefined {
    const raw = this.#readOne.get(seq);
    return raw && { payload: raw.payload, intact: intact(raw) };
  }

  /** Moves a row to the quarantine table, in one transaction; false if the row was gone. */
  quarantineRow(seq: number, reason: string, atMs: number): boolean {
    return this.#quarantineRow(seq, reason, atMs);
  }

  /** Writes a record that was never on disk (a memory item) straight to the quarantine table. */
  quarantineItem(row: SpillRow, reason: string, atMs: number): void {
    this.#quarantineItem(row, reason, atMs);
  }

  /** Rows in the quarantine table. */
  quarantineDepth(): number {
    return (
      this.#db.prepare<[], { n: number }>('SELECT COUNT(*) AS n FROM quarantine').get()?.n ?? 0
    );
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
