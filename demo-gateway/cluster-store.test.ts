import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import {
  EventType,
  LifecycleSeverity,
  PodLifecycleReason,
  ResourceKind,
  type AgentMessage,
} from '../proto/index.js';
import { ClusterStore } from './cluster-store.js';

let db: Database.Database;
afterEach(() => {
  db.close();
});

const state = (type: EventType, name: string, object: object): AgentMessage => ({
  messageId: `${name}-${String(type)}-${String(Math.random())}`,
  payload: {
    $case: 'state',
    value: {
      type,
      kind: ResourceKind.RESOURCE_KIND_UNSPECIFIED,
      apiVersion: 'v1',
      resource: 'configmaps',
      name,
      namespace: 'shop',
      labels: {},
      timestamp: '0',
      object: Buffer.from(JSON.stringify(object)),
    },
  },
});

const kubeEvent = (count: number): AgentMessage => ({
  messageId: `ev-${String(count)}`,
  payload: {
    $case: 'kubeEvent',
    value: {
      uid: 'uid-1',
      namespace: 'shop',
      name: 'web.backoff',
      type: 'Warning',
      reason: 'BackOff',
      note: 'Back-off restarting failed container',
      action: '',
      reportingController: 'kubelet',
      regarding: {
        kind: 'Pod',
        namespace: 'shop',
        name: 'web-1',
        uid: '',
        apiVersion: 'v1',
        fieldPath: '',
      },
      workload: { kind: 'Deployment', name: 'web' },
      count,
      firstTimestamp: '1000',
      lastTimestamp: String(1000 + count),
    },
  },
});

describe('ClusterStore', () => {
  it('keeps the newest object, counts live and deleted, and keeps a deleted one visible', () => {
    db = new Database(':memory:');
    const store = new ClusterStore(db);
    const cm = { kind: 'ConfigMap', metadata: { name: 'a' }, data: { v: '1' } };
    store.record(state(EventType.EVENT_TYPE_ADDED, 'a', cm), 'c', 1);
    store.record(
      state(EventType.EVENT_TYPE_ADDED, 'b', { ...cm, metadata: { name: 'b' } }),
      'c',
      2,
    );
    store.record(state(EventType.EVENT_TYPE_MODIFIED, 'a', { ...cm, data: { v: '2' } }), 'c', 3);
    store.record(
      state(EventType.EVENT_TYPE_DELETED, 'b', { ...cm, metadata: { name: 'b' } }),
      'c',
      4,
    );
    expect(store.counts()).toEqual([
      {
        resource: 'configmaps',
        apiVersion: 'v1',
        kind: 'ConfigMap',
        namespace: 'shop',
        live: 1,
        deleted: 1,
      },
    ]);
    const rows = store.objects({ resource: 'configmaps', namespace: 'shop' });
    expect(rows.map((r) => [r.name, r.lastType, r.changes])).toEqual([
      ['b', 'DELETED', 2],
      ['a', 'MODIFIED', 2],
    ]);
    expect(JSON.parse(store.object('configmaps', 'shop', 'a')?.object ?? '{}')).toMatchObject({
      data: { v: '2' },
    });
    expect(store.changes().map((c) => `${c.type} ${c.name}`)).toEqual([
      'DELETED b',
      'MODIFIED a',
      'ADDED b',
      'ADDED a',
    ]);
  });

  it('keeps one row per Kubernetes Event, its count raised; lifecycle events by severity; filters', () => {
    db = new Database(':memory:');
    const store = new ClusterStore(db);
    store.record(kubeEvent(1), 'c', 10);
    store.record(kubeEvent(3), 'c', 11);
    store.record(
      {
        messageId: 'lc-1',
        payload: {
          $case: 'podLifecycle',
          value: {
            reason: PodLifecycleReason.POD_LIFECYCLE_REASON_OOM_KILLED,
            pod: 'ledger-1',
            namespace: 'pay',
            podUid: 'u',
            container: 'app',
            node: 'n',
            workload: { kind: 'Deployment', name: 'ledger' },
            restartCount: 2,
            exitCode: 137,
            terminationReason: 'OOMKilled',
            message: '',
            severity: LifecycleSeverity.LIFECYCLE_SEVERITY_ERROR,
            timestamp: '12',
          },
        },
      },
      'c',
      12,
    );
    const events = store.events();
    expect(
      events.map((e) => [e.source, e.reason, e.severity, e.object, e.workload, e.count]),
    ).toEqual([
      ['lifecycle', 'OOM_KILLED', 'error', 'Pod/ledger-1', 'Deployment/ledger', 1],
      ['kube', 'BackOff', 'warning', 'Pod/web-1', 'Deployment/web', 3],
    ]);
    expect(events[0]?.message).toBe('container app · restarts 2 · last exit 137 OOMKilled');
    expect(store.events('ledger').map((e) => e.reason)).toEqual(['OOM_KILLED']);
    expect(store.events('back-off').map((e) => e.reason)).toEqual(['BackOff']);
    // LIKE's wildcards are taken literally.
    expect(store.events('%')).toEqual([]);
  });
});
