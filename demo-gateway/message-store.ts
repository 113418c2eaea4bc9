import Database from 'better-sqlite3';
import type { ControlEvent, ControlKind } from './api-types.js';
import { LogStore, type NewLogLine } from './log-store.js';
import { ClusterStore } from './cluster-store.js';

/** One received message as stored: the summary is for people, the payload is the wire bytes. */
export interface StoredMessage {
  readonly seq: number;
  readonly messageId: string;
  readonly sessionId: string;
  readonly agentId: string;
  readonly clusterId: string;
  readonly kind: string;
  readonly receivedAt: number;
  readonly summary: string;
}

export type NewMessage = Omit<StoredMessage, 'seq'> & { readonly payload: Uint8Array };

interface MessageRow {
  seq: number;
  message_id: string;
  session_id: string;
  agent_id: string;
  cluster_id: string;
  kind: string;
  received_at: number;
  summary: string;
}

const toStored = (row: MessageRow): StoredMessage => ({
  seq: row.seq,
  messageId: row.message_id,
  sessionId: row.session_id,
  agentId: row.agent_id,
  clusterId: row.cluster_id,
  kind: row.kind,
  receivedAt: row.received_at,
  summary: row.summary,
});

/**
 * Every message the demo gateway received, deduplicated by message_id: a redelivered item is
 * stored once, which is what lets tests assert "every item arrived, none twice".
 */
export class MessageStore {
  readonly logs: LogStore;
  /** State objects and events for the State and Events views. */
  readonly cluster: ClusterStore;
  readonly #db: Database.Database;
  readonly #insertControl: Database.Statement<[string, number, string, number, string]>;
  readonly #insert: Database.Statement<
    [string, string, string, string, string, number, string, Uint8Array]
  >;
  readonly #recent: Database.Statement<[number, number], MessageRow>;
  #duplicates = 0;
  /** Ids of messages received but not stored (storeLogBatches: false), deduplicated all the same. */
  readonly #unstored = new Set<string>();

  /** `path` ':memory:' (the default) keeps nothing after close. */
  constructor(path = ':memory:') {
    this.#db = new Database(path);
    this.#db.pragma('journal_mode = WAL');
    // A demo store: losing the last transactions to a power cut is fine, an fsync per received
    // message is not (WAL with NORMAL stays consistent after a crash of this process).
    this.#db.pragma('synchronous = NORMAL');
    this.#db.exec(`
      CREATE TABLE IF NOT EXISTS messages (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        message_id TEXT NOT NULL UNIQUE,
        session_id TEXT NOT NULL,
        agent_id TEXT NOT NULL,
        cluster_id TEXT NOT NULL,
        kind TEXT NOT NULL,
        received_at INTEGER NOT NULL,
        summary TEXT NOT NULL,
        payload BLOB NOT NULL
      )`);
    this.#db.exec(`
      CREATE TABLE IF NOT EXISTS control_events (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        session_id TEXT NOT NULL,
        at INTEGER NOT NULL,
        kind TEXT NOT NULL,
        outbound INTEGER NOT NULL,
        detail TEXT NOT NULL
      );
      CREATE INDEX IF NOT EXISTS control_events_session ON control_events (session_id, seq);`);
    this.logs = new LogStore(this.#db);
    this.cluster = new ClusterStore(this.#db);
    this.#insertControl = this.#db.prepare(
      'INSERT INTO control_events (session_id, at, kind, outbound, detail) VALUES (?, ?, ?, ?, ?)',
    );
    this.#insert = this.#db.prepare(
      `INSERT OR IGNORE INTO messages
         (message_id, session_id, agent_id, cluster_id, kind, received_at, summary, payload)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
    );
    this.#recent = this.#db.prepare(
      `SELECT seq, message_id, session_id, agent_id, cluster_id, kind, received_at, summary
         FROM messages WHERE seq > ? ORDER BY seq DESC LIMIT ?`,
    );
  }

  /**
   * Stores a message and its log records in one transaction; false if its message_id was
   * already stored (a duplicate, whose records are not stored again).
   */
  insert(message: NewMessage, lines: readonly NewLogLine[] = []): boolean {
    return this.#db.transaction(() => this.#insertOne(message, lines))();
  }

  #insertOne(message: NewMessage, lines: readonly NewLogLine[]): boolean {
    const { changes } = this.#insert.run(
      message.messageId,
      message.sessionId,
      message.agentId,
      message.clusterId,
      message.kind,
      message.receivedAt,
      message.summary,
      message.payload,
    );
    if (changes === 0) {
      this.#duplicates++;
      return false;
    }
    if (lines.length > 0) this.logs.insertLines(message.messageId, lines);
    return true;
  }

  /**
   * Records a message's id without storing the message (a log batch under storeLogBatches:
   * false); false if that id was already received so (a duplicate). The gateway's options are fixed,
   * so a log batch is never both stored and not.
   */
  receiveUnstored(messageId: string): boolean {
    if (this.#unstored.has(messageId)) {
      this.#duplicates++;
      return false;
    }
    this.#unstored.add(messageId);
    return true;
  }

  /** Messages received without being stored (storeLogBatches: false), duplicates not counted. */
  get unstored(): number {
    return this.#unstored.size;
  }

  /** Appends to a session's timeline. */
  recordControl(
    sessionId: string,
    event: { at: number; kind: ControlKind; outbound: boolean; detail: string },
  ): void {
    // A session closing while the gateway shuts down: the store may already be closed.
    if (!this.#db.open) return;
    this.#insertControl.run(sessionId, event.at, event.kind, event.outbound ? 1 : 0, event.detail);
  }

  /** A session's timeline, newest first. */
  controls(sessionId: string, limit = 100): ControlEvent[] {
    return this.#db
      .prepare<
        [string, number],
        {
          seq: number;
          session_id: string;
          at: number;
          kind: ControlKind;
          outbound: number;
          detail: string;
        }
      >(
        `SELECT seq, session_id, at, kind, outbound, detail FROM control_events
          WHERE session_id = ? ORDER BY seq DESC LIMIT ?`,
      )
      .all(sessionId, limit)
      .map((r) => ({
        seq: r.seq,
        sessionId: r.session_id,
        at: r.at,
        kind: r.kind,
        outbound: r.outbound === 1,
        detail: r.detail,
      }));
  }

  /** Duplicates seen since this store opened. */
  get duplicates(): number {
    return this.#duplicates;
  }

  count(kind?: string): number {
    const row =
      kind === undefined
        ? this.#db.prepare<[], { n: number }>('SELECT COUNT(*) AS n FROM messages').get()
        : this.#db
            .prepare<[string], { n: number }>('SELECT COUNT(*) AS n FROM messages WHERE kind = ?')
            .get(kind);
    return row?.n ?? 0;
  }

  countByKind(): Record<string, number> {
    const rows = this.#db
      .prepare<[], { kind: string; n: number }>(
        'SELECT kind, COUNT(*) AS n FROM messages GROUP BY kind',
      )
      .all();
    return Object.fromEntries(rows.map((r) => [r.kind, r.n]));
  }

  /** Newest first, only messages after `afterSeq`. */
  recent(limit: number, afterSeq = 0): StoredMessage[] {
    return this.#recent.all(afterSeq, limit).map(toStored);
  }

  /** Message ids of one kind in arrival order (for tests asserting delivery and order). */
  messageIds(kind: string): string[] {
    return this.#db
      .prepare<[string], { message_id: string }>(
        'SELECT message_id FROM messages WHERE kind = ? ORDER BY seq',
      )
      .all(kind)
      .map((r) => r.message_id);
  }

  /** The wire bytes (an encoded AgentMessage) of every message of one kind, in arrival order. */
  payloads(kind: string): Uint8Array[] {
    return this.#db
      .prepare<[string], { payload: Uint8Array }>(
        'SELECT payload FROM messages WHERE kind = ? ORDER BY seq',
      )
      .all(kind)
      .map((r) => r.payload);
  }

  close(): void {
    if (this.#db.open) this.#db.close();
  }
}
