// One watched object as it is cached (sanitized JSON, never the parsed object) and as it goes to
// the gateway: AgentMessage{meta, state: StateEvent} exactly as the wire table says (reference
// 16.6): kind from the closed enum (UNSPECIFIED for CRDs), api_version "v1" or "group/version",
// resource the plural.
import { AgentMessage, EventType } from '../../../proto/index.js';
import type { Cached, ChangeType } from '../../watch/informer.js';
import { objectKey } from '../../watch/informer.js';
import type { KubeObject } from '../../watch/kube-list-watch.js';
import { resourceKind } from './resource-kind.js';

/** What the cache keeps of one object: its identity and its sanitized JSON. */
export interface StateRecord extends Cached {
  readonly name: string;
  readonly namespace: string;
  readonly labels: Readonly<Record<string, string>> | undefined;
  /** The sanitized object, serialized once: a string costs a fraction of the parsed object. */
  readonly json: string;
}

export function toStateRecord(object: KubeObject): StateRecord {
  const metadata = object.metadata ?? {};
  const name = metadata.name ?? '';
  const namespace = metadata.namespace ?? '';
  return {
    key: objectKey(namespace, name),
    uid: metadata.uid ?? '',
    resourceVersion: metadata.resourceVersion ?? '',
    name,
    namespace,
    labels: metadata.labels,
    json: JSON.stringify(object),
  };
}

const EVENT_TYPES: Readonly<Record<ChangeType, EventType>> = {
  ADDED: EventType.EVENT_TYPE_ADDED,
  MODIFIED: EventType.EVENT_TYPE_MODIFIED,
  DELETED: EventType.EVENT_TYPE_DELETED,
};

export interface StateEventContext {
  readonly clusterId: string;
  readonly agentId: string;
  readonly group: string;
  readonly version: string;
  readonly resource: string;
}

export interface StateChange {
  readonly messageId: string;
  readonly type: ChangeType;
  readonly record: StateRecord;
  /** Unix ms: the event's and the message's timestamp. */
  readonly now: number;
}

export function encodeStateEvent(change: StateChange, context: StateEventContext): Uint8Array {
  const { messageId, type, record, now } = change;
  return AgentMessage.encode({
    messageId,
    meta: {
      tenantId: '',
      clusterId: context.clusterId,
      agentId: context.agentId,
      sessionId: '',
      timestamp: String(now),
    },
    payload: {
      $case: 'state',
      value: {
        type: EVENT_TYPES[type],
        kind: resourceKind(context.group, context.resource),
        name: record.name,
        namespace: record.namespace,
        object: Buffer.from(record.json, 'utf8'),
        timestamp: String(now),
        labels: { ...record.labels },
        apiVersion: context.group === '' ? context.version : `${context.group}/${context.version}`,
        resource: context.resource,
      },
    },
  }).finish();
}
