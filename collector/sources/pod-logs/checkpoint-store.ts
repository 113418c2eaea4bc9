// Checkpoints in SQLite, per container instance (pod UID, container, restart count): the
// position of the last line whose batch the buffer has released (on disk, acked or dropped),
// plus the "intents": batches handed to the buffer and not yet released, with their ids and end
// positions. After a crash the source re-reads from the checkpoint and cuts the same batches
// under the same ids, so the gateway's dedup by message_id absorbs whatever was delivered.
import type Database from 'better-sqlite3';
import { pino, type Logger } from 'pino';
import { openSqliteFile } from '../../sqlite/open-sqlite-file.js';
import { SchemaVersionError } from '../../sqlite/sqlite-errors.js';
import type { LinePosition } from './joiner.js';

/** A container instance: a restart is a new instance with its own log. */
export interface ContainerInstance {
  readonly podUid: string;
  readonly container: string;
  readonly restartCount: number;
}

export interface InstanceMeta {
  readonly namespace: string;
  readonly podName: string;
}

/** A batch handed to the buffer whose release has not been recorded yet. */
export interface Intent {
  readonly messageId: string;
  readonly end: LinePosition;
}

export interface SavedCheckpoint {
  readonly position: LinePosition | undefined;
  readonly intents: readonly Intent[];
  /** The instance was read to its end after a restart and everything released: never read again. */
  readonly finished?: boolean;
}

export interface CheckpointStore {
  load(instance: ContainerInstance): SavedCheckpoint;
  /** Records batches about to be enqueued, in one transaction. */
  recordIntents(
    entries: readonly { instance: ContainerInstance; meta: InstanceMeta; intent: Intent }[],
  ): void;
  /** Moves checkpoints forward (never back) and forgets the released intents, in one transaction. */
  advance(
    entries: readonly {
      instance: ContainerInstance;
      meta: InstanceMeta;
      position: LinePosition;
      released: readonly string[];
    }[],
  ): void;
  /** Marks an instance read to its end, every batch released: it is not read again. */
  markFinished(instance: ContainerInstance, meta: InstanceMeta): void;
  /** Marks every instance of a pod as deleted at `atMs` (cleanup starts after the grace period). */
  markPodDeleted(podUid: string, atMs: number): void;
  /** Deletes checkpoints and intents of pods deleted before `cutoffMs`; returns how many rows. */
  sweep(cutoffMs: number): number;
  /** Deletes the checkpoints and intents of these pods now (gone before this start); rows deleted. */
  removePods(podUids: readonly string[]): number;
  /** The pods that have a checkpoint or intents (after the first pod list, the absent ones are swept). */
  podUids(): string[];
  close(): void;
}

const SCHEMA_VERSION = 2;

/**
 * Opens (creating) the checkpoint database: WAL with `synchronous=NORMAL`, as the buffer's spill
 * file. A commit survives any crash of the process, which is what exactly-once rests on. On
 * power loss or a kernel crash the newest commits of either file can roll back, each on its
 * own; FULL here alone would not help (a checkpoint could then outlive the spill rows it
 * counted on), so both files share the one setting (docs/pod-logs.md, Durability).
 *
 * A damaged file does not stop the collector: the shared policy (collector/sqlite) salvages
 * every readable checkpoint and intent into a fresh file and moves the damaged one aside. A
 * container whose checkpoint was lost is read again from `tail_lines`, as a new one would be.
 */
export function openCheckpointStore(
  path: string,
  nowMs: () => number,
  logger: Logger = pino({ level: 'silent' }),
): CheckpointStore {
  const { db } = openSqliteFile(
    { path, synchronous: 'normal', label: 'checkpoint database', prepare: prepareSchema },
    { logger, now: nowMs },
  );
  const key = (i: ContainerInstance): [string, string, number] => [
    i.podUid,
    i.container,
    i.restartCount,
  ];
  const selectCheckpoint = db.prepare<
    [string, string, number],
    { sec: number; nanos: number; count: number; finished: number }
  >(
    'SELECT sec, nanos, count, finished FROM checkpoints WHERE pod_uid = ? AND container = ? AND restart_count = ?',
  );
  const selectIntents = db.prepare<
    [string, string, number],
    { message_id: string; sec: number; nanos: number; count: number }
  >(
    'SELECT message_id, sec, nanos, count FROM intents WHERE pod_uid = ? AND container = ? AND restart_count = ? ORDER BY sec, nanos, count',
  );
  const insertIntent = db.prepare('INSERT OR REPLACE INTO intents VALUES (?, ?, ?, ?, ?, ?, ?)');
  const deleteIntent = db.prepare(
    'DELETE FROM intents WHERE pod_uid = ? AND container = ? AND restart_count = ? AND message_id = ?',
  );
  // Forward only: a late or repeated release never moves a checkpoint back.
  const upsert = db.prepare(`
    INSERT INTO checkpoints (pod_uid, container, restart_count, namespace, pod_name,
      sec, nanos, count, updated_at_ms)
    VALUES (@podUid, @container, @restartCount, @namespace, @podName, @sec, @nanos, @count, @now)
    ON CONFLICT (pod_uid, container, restart_count) DO UPDATE SET
      sec = excluded.sec, nanos = excluded.nanos, count = excluded.count,
      updated_at_ms = excluded.updated_at_ms
    WHERE (excluded.sec, excluded.nanos, excluded.count) > (checkpoints.sec, checkpoints.nanos, checkpoints.count)
  `);
  // An instance never released into a checkpoint gets a row at position zero: it is not read.
  const finish = db.prepare(`
    INSERT INTO checkpoints (pod_uid, container, restart_count, namespace, pod_name,
      sec, nanos, count, updated_at_ms, finished)
    VALUES (@podUid, @container, @restartCount, @namespace, @podName, 0, 0, 0, @now, 1)
    ON CONFLICT (pod_uid, container, restart_count) DO UPDATE SET
      finished = 1, updated_at_ms = excluded.updated_at_ms
  `);
  const markDeleted = db.prepare(
    'UPDATE checkpoints SET deleted_at_ms = ? WHERE pod_uid = ? AND deleted_at_ms IS NULL',
  );
  const expired = db.prepare<[number], { pod_uid: string }>(
    'SELECT DISTINCT pod_uid FROM checkpoints WHERE deleted_at_ms IS NOT NULL AND deleted_at_ms < ?',
  );
  const deletePodCheckpoints = db.prepare('DELETE FROM checkpoints WHERE pod_uid = ?');
  const deletePodIntents = db.prepare('DELETE FROM intents WHERE pod_uid = ?');
  const allPods = db.prepare<[], { pod_uid: string }>(
    'SELECT pod_uid FROM checkpoints UNION SELECT pod_uid FROM intents',
  );

  return {
    load(instance) {
      const row = selectCheckpoint.get(...key(instance));
      const intents = selectIntents.all(...key(instance)).map((intent) => ({
        messageId: intent.message_id,
        end: { sec: intent.sec, nanos: intent.nanos, count: intent.count },
      }));
      const position = row && { sec: row.sec, nanos: row.nanos, count: row.count };
      return { position, intents, finished: row?.finished === 1 };
    },
    markFinished(instance, meta) {
      finish.run({ ...instance, ...meta, now: nowMs() });
    },
    recordIntents: db.transaction((entries: Parameters<CheckpointStore['recordIntents']>[0]) => {
      for (const { instance, intent } of entries) {
        const { sec, nanos, count } = intent.end;
        insertIntent.run(...key(instance), intent.messageId, sec, nanos, count);
      }
    }),
    advance: db.transaction((entries: Parameters<CheckpointStore['advance']>[0]) => {
      const now = nowMs();
      for (const { instance, meta, position, released } of entries) {
        upsert.run({ ...instance, ...meta, ...position, now });
        for (const id of released) deleteIntent.run(...key(instance), id);
      }
    }),
    markPodDeleted(podUid, atMs) {
      markDeleted.run(atMs, podUid);
    },
    sweep: db.transaction((cutoffMs: number) => {
      let rows = 0;
      for (const { pod_uid: podUid } of expired.all(cutoffMs)) {
        rows += deletePodCheckpoints.run(podUid).changes;
        rows += deletePodIntents.run(podUid).changes;
      }
      return rows;
    }),
    removePods: db.transaction((podUids: readonly string[]) => {
      let rows = 0;
      for (const podUid of podUids) {
        rows += deletePodCheckpoints.run(podUid).changes;
        rows += deletePodIntents.run(podUid).changes;
      }
      return rows;
    }),
    podUids: () => allPods.all().map((row) => row.pod_uid),
    close() {
      db.close();
    },
  };
}

function prepareSchema(db: Database.Database): void {
  const version = db.pragma('user_version', { simple: true }) as number;
  // Version 1 lacks `finished`; it is added below.
  if (version !== 0 && version !== 1 && version !== SCHEMA_VERSION) {
    throw new SchemaVersionError(`unknown checkpoint schema version ${String(version)}`);
  }
  db.exec(`
    CREATE TABLE IF NOT EXISTS checkpoints (
      pod_uid TEXT NOT NULL, container TEXT NOT NULL, restart_count INTEGER NOT NULL,
      namespace TEXT NOT NULL, pod_name TEXT NOT NULL,
      sec INTEGER NOT NULL, nanos INTEGER NOT NULL, count INTEGER NOT NULL,
      updated_at_ms INTEGER NOT NULL, deleted_at_ms INTEGER,
      finished INTEGER NOT NULL DEFAULT 0,
      PRIMARY KEY (pod_uid, container, restart_count)
    );
    CREATE TABLE IF NOT EXISTS intents (
      pod_uid TEXT NOT NULL, container TEXT NOT NULL, restart_count INTEGER NOT NULL,
      message_id TEXT NOT NULL, sec INTEGER NOT NULL, nanos INTEGER NOT NULL, count INTEGER NOT NULL,
      PRIMARY KEY (pod_uid, container, restart_count, message_id)
    );
  `);
  const columns = db.prepare<[], { name: string }>('PRAGMA table_info(checkpoints)').all();
  if (!columns.some((c) => c.name === 'finished')) {
    db.exec('ALTER TABLE checkpoints ADD COLUMN finished INTEGER NOT NULL DEFAULT 0');
  }
  db.pragma(`user_version = ${String(SCHEMA_VERSION)}`);
  // Reading every row of both tables once surfaces damaged pages here, where a salvage is
  // cheap, rather than in the middle of a flush.
  db.prepare('SELECT SUM(sec) FROM checkpoints').get();
  db.prepare('SELECT SUM(sec) FROM intents').get();
}

/** A store that keeps nothing: checkpoint_dir is empty, restarts start from tail_lines. */
export const memoryOnlyCheckpoints: CheckpointStore = {
  load: () => ({ position: undefined, intents: [] }),
  recordIntents: () => undefined,
  advance: () => undefined,
  markFinished: () => undefined,
  markPodDeleted: () => undefined,
  sweep: () => 0,
  removePods: () => 0,
  podUids: () => [],
  close: () => undefined,
};
