// The events source (collect.events): Kubernetes Events (events.k8s.io/v1, core/v1 where that is
// not served) with the involved object and its owning workload, and pod lifecycle events derived
// from pod status transitions (pod-lifecycle.ts). Both on the shared watch layer.
//
// Neither is sent until the gateway opts in (opt-in.ts, docs/state.md): a gateway that predates
// these payloads never receives them. Nothing is watched before the first opt-in either, and a
// source the gateway has not asked for does not hold readiness back.
// Kubernetes Events carry a message id derived from the event's UID and series count, so a
// relist or a restart that sends one again is deduplicated by the gateway; a count that grew
// is a new message.
import { createHash, randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { Clock } from '../../../shared/clock.js';
import {
  AgentMessage,
  LifecycleSeverity,
  PodLifecycleReason,
  type KubeEvent,
} from '../../../proto/index.js';
import type { ComponentHealth } from '../../health/health-server.js';
import { Discovery } from '../../watch/discovery.js';
import { Informer, objectKey, type Cached, type Change } from '../../watch/informer.js';
import type { KubeHttp } from '../../watch/kube-http.js';
import { kubeListWatch, type KubeObject, type WatchTarget } from '../../watch/kube-list-watch.js';
import { WatchHub } from '../../watch/shared-watch.js';
import { WorkloadResolver, type Workload } from '../pod-logs/workload.js';
import type { Sink, Source } from '../source.js';
import type { EventsDelivery } from './opt-in.js';
import {
  LifecycleTracker,
  podTransitions,
  SEVERITY,
  summarizePod,
  type LifecycleTransition,
  type PodSummary,
} from './pod-lifecycle.js';

export { OPT_IN_EVENTS, OPT_IN_LIFECYCLE } from './opt-in.js';

export interface EventsSourceOptions {
  readonly events: {
    readonly kubernetes_events: boolean;
    readonly pod_lifecycle: boolean;
    readonly exclude_namespaces: readonly string[];
  };
  readonly identity: { readonly clusterId: string; readonly agentId: string };
}

export interface EventsSourceDeps {
  readonly logger: Logger;
  readonly clock: Clock;
  readonly sink: Sink;
  /** Owner lookups and discovery (and the watches, without `watches`). */
  readonly http: Pick<KubeHttp, 'getJson' | 'getJsonIfChanged' | 'stream'>;
  /** The collector's shared watches (the lifecycle's pods are the log source's and state's). */
  readonly watches?: WatchHub;
}

/** Every pod: the lifecycle watch's target, shared with a cluster-wide pods rule and the logs. */
export const ALL_PODS: WatchTarget = {
  group: '',
  version: 'v1',
  resource: 'pods',
  namespaced: true,
  namespace: '',
};

export interface EventsSource extends Source {
  /**
   * What the gateway opted into (opt-in.ts). The watches run from start, unsent until then; the
   * first opt-in into Kubernetes Events sends the Events cached so far (what a list at that
   * moment would have sent). They run on after an opt-out, unsent.
   */
  setDelivery(delivery: EventsDelivery): void;
  health(): ComponentHealth;
}

/** What the cache keeps of one Kubernetes Event. */
interface EventRecord extends Cached {
  readonly event: Omit<KubeEvent, 'workload'>;
  readonly podOwner: PodOwner | undefined;
}

interface PodOwner {
  readonly namespace: string;
  readonly name: string;
}

const millis = (time: unknown): string => {
  if (typeof time !== 'string' || time === '') return '0';
  const ms = Date.parse(time);
  return Number.isNaN(ms) ? '0' : String(ms);
};

const text = (value: unknown): string => (typeof value === 'string' ? value : '');

interface RawRef {
  kind?: string;
  namespace?: string;
  name?: string;
  uid?: string;
  apiVersion?: string;
  fieldPath?: string;
}

/** events.k8s.io/v1's names of the fields core/v1 names differently. */
function modernFields(o: Record<string, unknown>, series: Series | undefined) {
  const first = o['deprecatedFirstTimestamp'] ?? o['eventTime'];
  return {
    regarding: o['regarding'] as RawRef | undefined,
    note: text(o['note']),
    count: series?.count ?? o['deprecatedCount'],
    first,
    last: series?.lastObservedTime ?? o['deprecatedLastTimestamp'] ?? first,
    controller: text(o['reportingController']),
  };
}

function coreFields(o: Record<string, unknown>, series: Series | undefined) {
  const first = o['firstTimestamp'] ?? o['eventTime'];
  const source = o['source'] as { component?: string } | undefined;
  return {
    regarding: o['involvedObject'] as RawRef | undefined,
    note: text(o['message']),
    count: series?.count ?? o['count'],
    first,
    last: o['lastTimestamp'] ?? first,
    controller: text(o['reportingComponent']) || text(source?.component),
  };
}

interface Series {
  count?: number;
  lastObservedTime?: string;
}

/** The fields events.k8s.io/v1 and core/v1 name differently, read from either. */
function eventFields(o: Record<string, unknown>) {
  const series = o['series'] as Series | undefined;
  const modern = o['regarding'] !== undefined || o['note'] !== undefined;
  return modern ? modernFields(o, series) : coreFields(o, series);
}

function reference(ref: RawRef | undefined) {
  const r = ref ?? {};
  return {
    kind: text(r.kind),
    namespace: text(r.namespace),
    name: text(r.name),
    uid: text(r.uid),
    apiVersion: text(r.apiVersion),
    fieldPath: text(r.fieldPath),
  };
}

/** events.k8s.io/v1 and core/v1 Events into one shape. */
export function summarizeEvent(object: KubeObject): EventRecord {
  const metadata = object.metadata ?? {};
  const o = object as Record<string, unknown>;
  const fields = eventFields(o);
  const namespace = text(metadata.namespace);
  const regarding = reference(fields.regarding);
  return {
    key: objectKey(namespace, metadata.name),
    uid: text(metadata.uid),
    resourceVersion: text(metadata.resourceVersion),
    event: {
      uid: text(metadata.uid),
      namespace,
      name: text(metadata.name),
      type: text(o['type']),
      reason: text(o['reason']),
      note: fields.note,
      action: text(o['action']),
      reportingController: fields.controller,
      regarding,
      count: typeof fields.count === 'number' ? fields.count : 1,
      firstTimestamp: millis(fields.first),
      lastTimestamp: millis(fields.last),
    },
    podOwner:
      regarding.kind === 'Pod'
        ? { namespace: regarding.namespace, name: regarding.name }
        : undefined,
  };
}

/** A UUID-shaped id from the event's UID and count: the same occurrence always has the same id. */
function eventMessageId(uid: string, count: number): string {
  const hex = createHash('sha256')
    .update(`kube-event/${uid}/${String(count)}`)
    .digest('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-5${hex.slice(13, 16)}-8${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
}

const REASONS: Readonly<Record<LifecycleTransition['reason'], PodLifecycleReason>> = {
  CREATED: PodLifecycleReason.POD_LIFECYCLE_REASON_CREATED,
  STARTED: PodLifecycleReason.POD_LIFECYCLE_REASON_STARTED,
  OOM_KILLED: PodLifecycleReason.POD_LIFECYCLE_REASON_OOM_KILLED,
  CRASH_LOOP_BACK_OFF: PodLifecycleReason.POD_LIFECYCLE_REASON_CRASH_LOOP_BACK_OFF,
  EVICTED: PodLifecycleReason.POD_LIFECYCLE_REASON_EVICTED,
  IMAGE_PULL_BACK_OFF: PodLifecycleReason.POD_LIFECYCLE_REASON_IMAGE_PULL_BACK_OFF,
  ERR_IMAGE_PULL: PodLifecycleReason.POD_LIFECYCLE_REASON_ERR_IMAGE_PULL,
  COMPLETED: PodLifecycleReason.POD_LIFECYCLE_REASON_COMPLETED,
  DELETED: PodLifecycleReason.POD_LIFECYCLE_REASON_DELETED,
};

const SEVERITIES = {
  INFO: LifecycleSeverity.LIFECYCLE_SEVERITY_INFO,
  WARNING: LifecycleSeverity.LIFECYCLE_SEVERITY_WARNING,
  ERROR: LifecycleSeverity.LIFECYCLE_SEVERITY_ERROR,
} as const;

export function createEventsSource(
  options: EventsSourceOptions,
  deps: EventsSourceDeps,
): EventsSource {
  const { logger, clock, sink, http } = deps;
  const hub =
    deps.watches ??
    new WatchHub({
      clock,
      logger,
      listWatch: (target) => kubeListWatch(http, target, (object) => object),
    });
  const excluded = new Set(options.events.exclude_namespaces);
  const lifetime = new AbortController();
  const tracker = new LifecycleTracker();
  const delivery = { lifecycle: false, events: false };
  const meta = () => ({
    tenantId: '',
    clusterId: options.identity.clusterId,
    agentId: options.identity.agentId,
    sessionId: '',
    timestamp: String(clock.now()),
  });
  const owners = new WorkloadResolver(
    async (kind, namespace, name, deadline) => {
      const path =
        kind === 'ReplicaSet'
          ? `/apis/apps/v1/namespaces/${encodeURIComponent(namespace)}/replicasets/${encodeURIComponent(name)}`
          : `/apis/batch/v1/namespaces/${encodeURIComponent(namespace)}/jobs/${encodeURIComponent(name)}`;
      const object = (await http.getJson(
        { path },
        AbortSignal.any([lifetime.signal, deadline]),
      )) as KubeObject;
      const refs = (object.metadata?.['ownerReferences'] ?? []) as {
        kind: string;
        name: string;
        apiVersion: string;
        uid: string;
        controller?: boolean;
      }[];
      return refs.find((ref) => ref.controller === true);
    },
    () => clock.now(),
  );
  const workloadOf = (namespace: string, owner: PodSummary['owner']): Promise<Workload> =>
    owners.resolve({
      metadata: {
        namespace,
        ownerReferences:
          owner === undefined
            ? []
            : [{ apiVersion: '', kind: owner.kind, name: owner.name, uid: '', controller: true }],
      },
    });
  const informers: Informer<Cached>[] = [];
  const runs: Promise<void>[] = [];

  /**
   * Per pod, the sends still resolving their workload: a pod's transitions leave in the order
   * they were found (each resolve may ask the API server, and a later one can answer first).
   */
  const sending = new Map<string, Promise<void>>();

  function sendLifecycle(pod: PodSummary, found: readonly LifecycleTransition[]): void {
    if (found.length === 0 || !delivery.lifecycle) return;
    const before = sending.get(pod.uid) ?? Promise.resolve();
    const send = before.then(async () => {
      const workload = await workloadOf(pod.namespace, pod.owner);
      for (const t of found) {
        const messageId = randomUUID();
        const payload = AgentMessage.encode({
          messageId,
          meta: meta(),
          payload: {
            $case: 'podLifecycle',
            value: {
              reason: REASONS[t.reason],
              pod: pod.name,
              namespace: pod.namespace,
              podUid: pod.uid,
              container: t.container,
              node: pod.node,
              workload,
              restartCount: t.restartCount,
              exitCode: t.exitCode,
              terminationReason: t.terminationReason,
              message: t.message,
              severity: SEVERITIES[SEVERITY[t.reason]],
              timestamp: String(clock.now()),
            },
          },
        }).finish();
        sink.enqueue({ id: messageId, kind: 'state', payload });
      }
    });
    sending.set(pod.uid, send);
    void send.finally(() => {
      if (sending.get(pod.uid) === send) sending.delete(pod.uid);
    });
  }

  function onPod(informer: Informer<PodSummary>, change: Change<PodSummary>): void {
    const pod = change.object;
    if (excluded.has(pod.namespace) || change.resync === true) return;
    if (change.type === 'DELETED') {
      sendLifecycle(pod, tracker.fresh(pod.uid, podTransitions(pod, undefined)));
      tracker.forget(pod.uid);
      return;
    }
    const found = podTransitions(change.previous, pod);
    // The first list at start: what pods already show is not news.
    if (!informer.synced()) tracker.baseline(pod.uid, found);
    else sendLifecycle(pod, tracker.fresh(pod.uid, found));
  }

  function onEvent(change: Change<EventRecord>): void {
    const record = change.object;
    if (change.type === 'DELETED' || change.resync === true || !delivery.events) return;
    // A series that grew is news; any other change of the same count is not.
    if (change.previous !== undefined && change.previous.event.count >= record.event.count) return;
    sendEvent(record);
  }

  function sendEvent(record: EventRecord): void {
    if (excluded.has(record.event.namespace)) return;
    const owner = record.podOwner;
    const workload: Promise<Workload | undefined> =
      owner === undefined ? Promise.resolve(undefined) : workloadOfPod(owner);
    void workload.then((resolved) => {
      const messageId = eventMessageId(record.uid, record.event.count);
      const payload = AgentMessage.encode({
        messageId,
        meta: meta(),
        payload: { $case: 'kubeEvent', value: { ...record.event, workload: resolved } },
      }).finish();
      sink.enqueue({ id: messageId, kind: 'state', payload });
    });
  }

  /** The workload of the pod an Event is about, from the lifecycle cache when it has the pod. */
  function workloadOfPod(owner: PodOwner): Promise<Workload | undefined> {
    const pods = informers[0] as Informer<PodSummary> | undefined;
    const pod = pods?.get(objectKey(owner.namespace, owner.name));
    if (pod === undefined) return Promise.resolve(undefined);
    return workloadOf(pod.namespace, pod.owner);
  }

  async function startEvents(): Promise<void> {
    const resolve = new Discovery(http).snapshot(lifetime.signal);
    const modern = await resolve({ group: 'events.k8s.io', version: 'v1', resource: 'events' });
    const ref =
      modern.state === 'available'
        ? { group: 'events.k8s.io', version: 'v1' }
        : { group: '', version: 'v1' };
    const informer = new Informer<EventRecord>(
      hub.feed({ ...ref, resource: 'events', namespaced: true, namespace: '' }, summarizeEvent),
      { name: 'events', clock, logger, onChange: onEvent },
    );
    eventsInformer = informer;
    informers.push(informer);
    replayEvents();
    logger.info(
      { apiVersion: ref.group === '' ? 'v1' : 'events.k8s.io/v1' },
      'kubernetes events watch started',
    );
    await informer.run(lifetime.signal);
  }

  let eventsInformer: Informer<EventRecord> | undefined;
  let eventsReplayed = false;
  /** The first opt-in into Events: what a list at that moment would have sent. */
  function replayEvents(): void {
    if (eventsReplayed || !delivery.events || eventsInformer === undefined) return;
    eventsReplayed = true;
    for (const record of eventsInformer.values()) sendEvent(record);
  }

  let watching = false;
  /** Starts the watches once, at start: nothing is sent before the gateway opts in. */
  function startWatches(): void {
    if (watching || lifetime.signal.aborted) return;
    watching = true;
    // The pod informer first: Events look their pod up in its cache.
    const pods = new Informer<PodSummary>(hub.feed(ALL_PODS, summarizePod), {
      name: 'pods (lifecycle)',
      clock,
      logger,
      onChange: (change) => {
        onPod(pods, change);
      },
    });
    informers.push(pods);
    runs.push(pods.run(lifetime.signal));
    if (options.events.kubernetes_events) {
      discovering = true;
      runs.push(
        startEvents()
          .catch((err: unknown) => {
            logger.warn(
              { reason: err instanceof Error ? err.message : String(err) },
              'kubernetes events watch failed to start',
            );
          })
          .finally(() => {
            discovering = false;
          }),
      );
    }
  }
  /** The Events watch is added after a discovery request: until then it cannot have synced. */
  let discovering = false;

  let started = false;
  const wanted = (): boolean => delivery.lifecycle || delivery.events;
  const unsynced = (): string[] =>
    informers.length === 0
      ? ['starting']
      : [
          ...informers.filter((i) => !i.synced()).map((i) => i.name),
          ...(discovering && informers.length < 2 ? ['events (discovery)'] : []),
        ];
  const pending = (): string[] => (wanted() ? unsynced() : []);

  return {
    name: 'events',
    start(signal) {
      if (signal.aborted) lifetime.abort();
      else
        signal.addEventListener(
          'abort',
          () => {
            lifetime.abort();
          },
          { once: true },
        );
      started = true;
      // Listed and watched from start, so that the first sync does not wait for the gateway's
      // handshake; nothing is sent before the gateway opts in (an old gateway never is).
      startWatches();
      return Promise.resolve();
    },
    setDelivery(next) {
      const lifecycle = next.lifecycle && options.events.pod_lifecycle;
      const events = next.events && options.events.kubernetes_events;
      if (lifecycle !== delivery.lifecycle || events !== delivery.events) {
        logger.info({ lifecycle, events }, 'gateway opted into events');
      }
      delivery.lifecycle = lifecycle;
      delivery.events = events;
      if (started) replayEvents();
    },
    // Not asked for: nothing to wait for. Asked for: ready once every watch has synced (the
    // Events watch is added after discovery, so an empty list right after start is not ready).
    up: () => !wanted() || pending().length === 0,
    health() {
      if (!wanted()) {
        // Watching already (the first sync does not wait for the handshake), not sending.
        const syncing = unsynced();
        const also = syncing.length === 0 ? '' : `; not synced: ${syncing.join(', ')}`;
        return { state: 'ok', reason: `the gateway has not opted in: not sending${also}` };
      }
      const names = pending();
      return names.length === 0
        ? { state: 'ok' }
        : { state: 'unhealthy', reason: `not synced: ${names.join(', ')}` };
    },
    async close() {
      lifetime.abort();
      await Promise.allSettled(runs);
    },
  };
}
