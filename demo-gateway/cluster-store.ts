// What the State and Events views read: the newest version of every object the agents' state
// watches reported (DELETED objects kept, marked), the latest state changes, and one row per
// Kubernetes Event (its count updated as the series grows) or pod lifecycle event. Kept in the
// demo gateway's SQLite database beside the messages they came from.
import type Database from 'better-sqlite3';
import {
  EventType,
  LifecycleSeverity,
  podLifecycleReasonToJSON,
  type AgentMessage,
  type KubeEvent,
  type PodLifecycleEvent,
  type StateEvent,
} from '../proto/index.js';
import type { EventRow, KindCount, ObjectDetail, ObjectRow, StateChange } from './cluster-types.js';

const TYPE_NAMES: Record<number, string> = {
  [EventType.EVENT_TYPE_ADDED]: 'ADDED',
  [EventType.EVENT_TYPE_MODIFIED]: 'MODIFIED',
  [EventType.EVENT_TYPE_DELETED]: 'DELETED',
};

const SEVERITY_NAMES: Record<number, EventRow['severity']> = {
  [LifecycleSeverity.LIFECYCLE_SEVERITY_INFO]: 'info',
  [LifecycleSeverity.LIFECYCLE_SEVERITY_WARNING]: 'warning',
  [LifecycleSeverity.LIFECYCLE_SEVERITY_ERROR]: 'error',
};

/** Changes kept for the "recent changes" list. */
const KEEP_CHANGES = 2000;

interface ObjectSqlRow {
  resource: string;
  api_version: string;
  kind: string;
  namespace: string;
  name: string;
  last_type: string;
  changes: number;
  updated_at: number;
}

const toObjectRow = (r: ObjectSqlRow): ObjectRow => ({
  resource: r.resource,
  apiVersion: r.api_version,
  kind: r.kind,
  namespace: r.namespace,
  name: r.name,
  lastType: r.last_type,
  changes: r.changes,
  updatedAt: r.updated_at,
});

/** The object's kind from its JSON (CRDs have no enum value), else the plural resource. */
function kindOf(event: StateEvent, object: string): string {
  try {
    const kind = (JSON.parse(object) as { kind?: unknown }).kind;
    if (typeof kind === 'string' && kind !== '') return kind;
  } catch {
    // Not JSON: the resource names it.
  }
  return event.resource;
}

const ref = (kind: string | undefined, name: string | undefined): string =>
  kind !== undefined && kind !== '' ? `${kind}/${name ?? ''}` : (name ?? '');

export class ClusterStore {
  readonly #db: Database.Database;

  constructor(db: Database.Database) {
    this.#db = db;
    db.exec(`
      CREATE TABLE IF NOT EXISTS cluster_objects (
        cluster_id TEXT NOT NULL,
        resource TEXT NOT NULL,
        api_version TEXT NOT NULL,
        kind TEXT NOT NULL,
        namespace TEXT NOT NULL,
        name TEXT NOT NULL,
        last_type TEXT NOT NULL,
        changes INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        object TEXT NOT NULL,
        PRIMARY KEY (cluster_id, resource, namespace, name)
      );
      CREATE TABLE IF NOT EXISTS state_changes (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        at INTEGER NOT NULL,
        type TEXT NOT NULL,
        resource TEXT NOT NULL,
        namespace TEXT NOT NULL,
        name TEXT NOT NULL
      );
      CREATE TABLE IF NOT EXISTS cluster_events (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        event_key TEXT NOT NULL UNIQUE,
        source TEXT NOT NULL,
        reason TEXT NOT NULL,
        severity TEXT NOT NULL,
        namespace TEXT NOT NULL,
        object TEXT NOT NULL,
        workload TEXT NOT NULL,
        count INTEGER NOT NULL,
        message TEXT NOT NULL,
        last_at INTEGER NOT NULL,
        received_at INTEGER NOT NULL
      );`);
  }

  /** Records a state, Kubernetes Event or lifecycle message; other kinds are ignored. */
  record(message: AgentMessage, clusterId: string, receivedAt: number): void {
    const payload = message.payload;
    // A message arriving while the gateway shuts down: the store may already be closed.
    if (!this.#db.open) return;
    if (payload?.$case === 'state') this.#state(payload.value, clusterId, receivedAt);
    else if (payload?.$case === 'kubeEvent') this.#kubeEvent(payload.value, receivedAt);
    else if (payload?.$case === 'podLifecycle')
      this.#lifecycle(message.messageId, payload.value, receivedAt);
  }

  #state(event: StateEvent, clusterId: string, at: number): void {
    const type = TYPE_NAMES[event.type] ?? 'UNSPECIFIED';
    const object = Buffer.from(event.object).toString('utf8');
    this.#db.transaction(() => {
      this.#db
        .prepare(
          `INSERT INTO cluster_objects (cluster_id, resource, api_version, kind, namespace, name,
             last_type, changes, updated_at, object) VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?, ?)
           ON CONFLICT (cluster_id, resource, namespace, name) DO UPDATE SET
             last_type = excluded.last_type, changes = changes + 1,
             updated_at = excluded.updated_at, api_version = excluded.api_version,
             kind = excluded.kind,
             object = CASE WHEN excluded.object = '' THEN object ELSE excluded.object END`,
        )
        .run(
          clusterId,
          event.resource,
          event.apiVersion,
          kindOf(event, object),
          event.namespace,
          event.name,
          type,
          at,
          object,
        );
      const { lastInsertRowid } = this.#db
        .prepare(
          'INSERT INTO state_changes (at, type, resource, namespace, name) VALUES (?, ?, ?, ?, ?)',
        )
        .run(at, type, event.resource, event.namespace, event.name);
      this.#db
        .prepare('DELETE FROM state_changes WHERE seq <= ?')
        .run(Number(lastInsertRowid) - KEEP_CHANGES);
    })();
  }

  #kubeEvent(event: KubeEvent, at: number): void {
    // One row per Event: a grown series updates its count and time.
    this.#db
      .prepare(
        `INSERT INTO cluster_events (event_key, source, reason, severity, namespace, object,
           workload, count, message, last_at, received_at)
         VALUES (?, 'kube', ?, ?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (event_key) DO UPDATE SET count = MAX(count, excluded.count),
           last_at = MAX(last_at, excluded.last_at), message = excluded.message,
           received_at = excluded.received_at, workload = excluded.workload`,
      )
      .run(
        `kube/${event.uid}`,
        event.reason,
        event.type === 'Warning' ? 'warning' : 'info',
        event.namespace,
        ref(event.regarding?.kind, event.regarding?.name ?? event.name),
        ref(event.workload?.kind, event.workload?.name),
        event.count,
        event.note,
        Number(event.lastTimestamp) || at,
        at,
      );
  }

  #lifecycle(messageId: string, event: PodLifecycleEvent, at: number): void {
    const reason = podLifecycleReasonToJSON(event.reason).replace('POD_LIFECYCLE_REASON_', '');
    const detail = [
      event.container === '' ? '' : `container ${event.container}`,
      event.restartCount > 0 ? `restarts ${String(event.restartCount)}` : '',
      event.terminationReason === ''
        ? ''
        : `last exit ${String(event.exitCode)} ${event.terminationReason}`,
      event.message,
    ].filter((part) => part !== '');
    this.#db
      .prepare(
        `INSERT OR IGNORE INTO cluster_events (event_key, source, reason, severity, namespace,
           object, workload, count, message, last_at, received_at)
         VALUES (?, 'lifecycle', ?, ?, ?, ?, ?, 1, ?, ?, ?)`,
      )
      .run(
        `lifecycle/${messageId}`,
        reason,
        SEVERITY_NAMES[event.severity] ?? 'info',
        event.namespace,
        `Pod/${event.pod}`,
        ref(event.workload?.kind, event.workload?.name),
        detail.join(' · '),
        Number(event.timestamp) || at,
        at,
      );
  }

  /** Live and deleted objects per resource and namespace. */
  counts(): KindCount[] {
    return this.#db
      .prepare<
        [],
        {
          resource: string;
          api_version: string;
          kind: string;
          namespace: string;
          live: number;
          deleted: number;
        }
      >(
        `SELECT resource, MAX(api_version) AS api_version, MAX(kind) AS kind, namespace,
                SUM(last_type != 'DELETED') AS live, SUM(last_type = 'DELETED') AS deleted
           FROM cluster_objects GROUP BY resource, namespace ORDER BY resource, namespace`,
      )
      .all()
      .map((r) => ({
        resource: r.resource,
        apiVersion: r.api_version,
        kind: r.kind,
        namespace: r.namespace,
        live: r.live,
        deleted: r.deleted,
      }));
  }

  /** Objects of one resource (optionally one namespace), newest change first. */
  objects(filter: { resource?: string; namespace?: string }, limit = 500): ObjectRow[] {
    return this.#db
      .prepare<[string, string, string, string, number], ObjectSqlRow>(
        `SELECT resource, api_version, kind, namespace, name, last_type, changes, updated_at
           FROM cluster_objects
          WHERE (? = '' OR resource = ?) AND (? = '' OR namespace = ?)
          ORDER BY updated_at DESC, name LIMIT ?`,
      )
      .all(
        filter.resource ?? '',
        filter.resource ?? '',
        filter.namespace ?? '',
        filter.namespace ?? '',
        limit,
      )
      .map(toObjectRow);
  }

  object(resource: string, namespace: string, name: string): ObjectDetail | undefined {
    const row = this.#db
      .prepare<[string, string, string], ObjectSqlRow & { object: string }>(
        `SELECT resource, api_version, kind, namespace, name, last_type, changes, updated_at,
                object FROM cluster_objects WHERE resource = ? AND namespace = ? AND name = ?
          ORDER BY updated_at DESC LIMIT 1`,
      )
      .get(resource, namespace, name);
    return row === undefined ? undefined : { ...toObjectRow(row), object: row.object };
  }

  /** The newest state changes, newest first. */
  changes(limit = 50): StateChange[] {
    return this.#db
      .prepare<[number], StateChange>(
        `SELECT seq, at, type, resource, namespace, name FROM state_changes
          ORDER BY seq DESC LIMIT ?`,
      )
      .all(limit);
  }

  /**
   * Events newest first; `text` matches reason, object, workload, namespace or message
   * (case-insensitive substring).
   */
  events(text = '', limit = 300): EventRow[] {
    const like = `%${text.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
    return this.#db
      .prepare<
        [string, string, string, string, string, string, number],
        {
          seq: number;
          source: EventRow['source'];
          reason: string;
          severity: EventRow['severity'];
          namespace: string;
          object: string;
          workload: string;
          count: number;
          message: string;
          last_at: number;
          received_at: number;
        }
      >(
        `SELECT seq, source, reason, severity, namespace, object, workload, count, message,
                last_at, received_at FROM cluster_events
          WHERE (? = '%%' OR reason LIKE ? ESCAPE '\\' OR object LIKE ? ESCAPE '\\'
                 OR workload LIKE ? ESCAPE '\\' OR namespace LIKE ? ESCAPE '\\'
                 OR message LIKE ? ESCAPE '\\')
          ORDER BY received_at DESC, seq DESC LIMIT ?`,
      )
      .all(like, like, like, like, like, like, limit)
      .map((r) => ({
        seq: r.seq,
        source: r.source,
        reason: r.reason,
        severity: r.severity,
        namespace: r.namespace,
        object: r.object,
        workload: r.workload,
        count: r.count,
        message: r.message,
        lastAt: r.last_at,
        receivedAt: r.received_at,
      }));
  }
}
