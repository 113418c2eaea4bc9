// The state source (collect.state): watches every resource the rules name, and the gateway's
// demand watchers (ConfigUpdate.watchers), and sends each change as a StateEvent.
//
// - Resources resolve through discovery at start, and again every `discoveryIntervalMs` only
//   while something waits on it: a rule naming a resource the server does not serve (reported
//   unavailable while the other watches run on; a CRD installed later is picked up at the next
//   round), or a round that could not ask. A running watch whose list the API server answers 404
//   (its CRD or version removed: the objects were deleted, and their DELETED events sent, before
//   the CRD itself went away) asks for a round at once; it is stopped when that round and the next
//   one both find the resource gone (one answer is not enough: right after an API server restart
//   a CRD's resource is briefly absent, and a restarted watch would send every object again).
//   While every watch runs,
//   discovery sleeps: it was two requests every 30 s, about 5 ms of an idle collector's CPU each
//   time (README, "Idle footprint").
// - One watch per namespace + resource across rules: the first rule naming it decides the
//   selectors and resync (the Go agent's rule); a later rule with other selectors is warned about.
// - Secrets never emit ADDED (the Go agent's rule); objects are sanitized before they are cached
//   (sanitize.ts); under security.profile strict, Secrets are read as metadata only.
// - Nothing here logs an object: names, resources and API Status messages only.
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { Clock } from '../../../shared/clock.js';
import { parseResource } from '../../../shared/config/resources.js';
import type { Config } from '../../../shared/config/schema.js';
import type { ComponentHealth } from '../../health/health-server.js';
import {
  Discovery,
  refKey,
  type Resolution,
  type ResourceRef,
  type ResolvedResource,
} from '../../watch/discovery.js';
import { Informer, type Change } from '../../watch/informer.js';
import type { KubeHttp } from '../../watch/kube-http.js';
import { kubeListWatch, type KubeObject } from '../../watch/kube-list-watch.js';
import type { RestartCause } from '../../watch/reflector.js';
import { WatchHub } from '../../watch/shared-watch.js';
import type { Sink, Source } from '../source.js';
import { isSecretResource, sanitizeObject } from './sanitize.js';
import { encodeStateEvent, toStateRecord, type StateRecord } from './state-event.js';

export const DISCOVERY_INTERVAL_MS = 30_000;
/**
 * The hub is held for the first discovery at most this long: a discovery request the API server
 * never answers must not keep the other users' watches (the log source's pods) from starting.
 */
export const DISCOVERY_HOLD_MAX_MS = 10_000;

/** Counters the source reports (state-metrics.ts binds them to /metrics). */
export interface StateCounters {
  event(resource: string, type: string): void;
  dropped(resource: string, reason: string): void;
  restarted(resource: string, cause: RestartCause): void;
}

export interface StateSourceOptions {
  readonly state: Config['collect']['state'];
  readonly identity: { readonly clusterId: string; readonly agentId: string };
  /** security.profile strict: Secrets are listed and watched as PartialObjectMetadata. */
  readonly secretsMetadataOnly: boolean;
  readonly discoveryIntervalMs?: number;
}

export interface StateSourceDeps {
  readonly logger: Logger;
  readonly clock: Clock;
  readonly sink: Sink;
  readonly http: KubeHttp;
  readonly counters?: StateCounters;
  readonly newId?: () => string;
  /** The collector's shared watches (a pods rule shares the log source's and lifecycle's). */
  readonly watches?: WatchHub;
}

/** One wanted watch, from a rule or from the gateway's demand. */
interface Want {
  readonly ref: ResourceRef;
  readonly namespace: string;
  readonly labelSelector: string;
  readonly fieldSelector: string;
  readonly resyncMs: number;
  /** `rule <id>` or `demand`. */
  readonly origin: string;
  readonly static: boolean;
}

interface Running {
  readonly want: Want;
  readonly resolved: ResolvedResource;
  readonly informer: Informer<StateRecord>;
  readonly stop: AbortController;
  readonly done: Promise<void>;
}

export interface StateWatchStatus {
  readonly resource: string;
  readonly namespace: string;
  readonly origin: string;
  readonly state: 'synced' | 'syncing' | 'forbidden' | 'unavailable' | 'resolving';
  readonly objects: number;
  readonly reason?: string;
}

export interface StateSource extends Source {
  /** The gateway's demand watchers: start the missing, stop the unwanted, leave the rest. */
  reconcileDemand(refs: readonly ResourceRef[]): void;
  /** Readiness with the unsynced (or forbidden) resource named. */
  health(): ComponentHealth;
  watches(): StateWatchStatus[];
}

const raw = (object: KubeObject): KubeObject => object;

/** Read through a call: TypeScript narrows `signal.aborted` across awaits otherwise. */
const isAborted = (signal: AbortSignal): boolean => signal.aborted;

const wantKey = (want: Pick<Want, 'namespace' | 'ref'>): string =>
  `${want.namespace}|${refKey(want.ref)}`;

/** The static wants of collect.state.rules, one per namespace + resource. */
export function staticWants(state: Config['collect']['state'], logger: Logger): Want[] {
  const wants = new Map<string, Want>();
  for (const rule of state.rules) {
    for (const text of rule.resources) {
      const ref = parseResource(text);
      if (ref === undefined) continue; // The config check refuses these; never here.
      const want: Want = {
        ref,
        namespace: rule.namespace,
        labelSelector: rule.label_selector,
        fieldSelector: rule.field_selector,
        resyncMs: rule.resync_period ?? state.resync_period,
        origin: `rule ${rule.id}`,
        static: true,
      };
      const existing = wants.get(wantKey(want));
      if (existing === undefined) {
        wants.set(wantKey(want), want);
      } else if (
        existing.labelSelector !== want.labelSelector ||
        existing.fieldSelector !== want.fieldSelector
      ) {
        logger.warn(
          {
            resource: refKey(ref),
            namespace: want.namespace,
            kept: existing.origin,
            ignored: want.origin,
          },
          "two collect.state rules watch the same namespace and resource with different selectors: one watch serves both, with the first rule's selectors",
        );
      }
    }
  }
  return [...wants.values()];
}

export function createStateSource(options: StateSourceOptions, deps: StateSourceDeps): StateSource {
  const { logger, clock, sink } = deps;
  const newId = deps.newId ?? randomUUID;
  const discovery = new Discovery(deps.http);
  const hub =
    deps.watches ??
    new WatchHub({ clock, logger, listWatch: (target) => kubeListWatch(deps.http, target, raw) });
  // The rules' watches are known after a discovery request: until they are subscribed, no shared
  // watch starts, so a pods rule shares the first list of the log source's and lifecycle's pods.
  const releaseHub = hub.hold();
  const lifetime = new AbortController();
  const statics = staticWants(options.state, logger);
  let demand: Want[] = [];
  const running = new Map<string, Running>();
  const unavailable = new Map<string, string>();
  let reconciling: Promise<void> = Promise.resolve();
  /** The next round, armed only while a want waits on discovery (scheduleRound). */
  let timer: ReturnType<typeof setTimeout> | undefined;
  /** The last round could not ask (discovery failed for a want): asked again at the interval. */
  let lastRoundFailed = false;
  /** A round is queued and has not started: a 404 or the timer joins it instead of adding one. */
  let roundQueued = false;
  /**
   * Running watches discovery called missing once: stopped only if the next round says so too.
   * Right after an API server restart a CRD's resource answers 404 (and is absent from discovery)
   * until the server's CRD informer has synced; stopping on one answer would replay every object.
   */
  const suspect = new Set<string>();

  const desired = (): Want[] => {
    const keys = new Set(statics.map(wantKey));
    // A demand the rules already watch cluster-wide needs no second watch.
    return [...statics, ...demand.filter((want) => !keys.has(wantKey(want)))];
  };

  function emit(want: Want, resolved: ResolvedResource, change: Change<StateRecord>): void {
    const resource = refKey(want.ref);
    // The Go agent's rule: a Secret is never sent as ADDED (its first event is a change).
    if (change.type === 'ADDED' && isSecretResource(resolved.group, resolved.resource)) return;
    const id = newId();
    const payload = encodeStateEvent(
      { messageId: id, type: change.type, record: change.object, now: clock.now() },
      {
        clusterId: options.identity.clusterId,
        agentId: options.identity.agentId,
        group: resolved.group,
        version: resolved.version,
        resource: resolved.resource,
      },
    );
    sink.enqueue({ id, kind: 'state', payload });
    deps.counters?.event(resource, change.resync === true ? 'RESYNC' : change.type);
  }

  function start(want: Want, resolved: ResolvedResource, key: string): void {
    const metadataOnly =
      options.secretsMetadataOnly && isSecretResource(resolved.group, resolved.resource);
    const target = {
      group: resolved.group,
      version: resolved.version,
      resource: resolved.resource,
      namespaced: resolved.namespaced,
      namespace: resolved.namespaced ? want.namespace : '',
      labelSelector: want.labelSelector,
      fieldSelector: want.fieldSelector,
      metadataOnly,
    };
    const redact = { redactSecrets: options.state.redact_secrets };
    const transform = (object: KubeObject): StateRecord => {
      if (metadataOnly && object.kind !== undefined) {
        // PartialObjectMetadata of a Secret: it stays a Secret to the gateway, without a body.
        object.kind = resolved.kind;
        object.apiVersion = 'v1';
      }
      return toStateRecord(sanitizeObject(object, resolved, redact));
    };
    const resource = refKey(want.ref);
    const stop = new AbortController();
    const informer = new Informer(hub.feed(target, transform), {
      name: resource,
      clock,
      logger,
      resyncMs: want.resyncMs,
      onChange: (change) => {
        emit(want, resolved, change);
      },
      onForbidden: (err, verb) => {
        logger.error(
          {
            resource,
            namespace: target.namespace,
            verb,
            reason: err instanceof Error ? err.message : String(err),
          },
          `state watch forbidden: the collector's ServiceAccount may not ${verb} ${resource}; grant it in the ClusterRole (rbac.readAll or rbac.extraRules)`,
        );
      },
      onRestart: (cause) => deps.counters?.restarted(resource, cause),
      onFailure: (failure) => {
        // Not served any more (its CRD or version removed)? A round now, and one to confirm.
        if (failure.code === 404) requestRound();
      },
    });
    const done = informer.run(AbortSignal.any([lifetime.signal, stop.signal]));
    running.set(key, { want, resolved, informer, stop, done });
    logger.info(
      { resource, namespace: target.namespace, origin: want.origin, metadataOnly },
      'state watch started',
    );
  }

  function stopWatch(key: string, why: string): void {
    const watch = running.get(key);
    if (watch === undefined) return;
    running.delete(key);
    watch.stop.abort();
    logger.info(
      { resource: refKey(watch.want.ref), namespace: watch.want.namespace, why },
      'state watch stopped',
    );
  }

  /** Applies one want's discovery answer; returns whether its watch should keep running. */
  function applyResolution(want: Want, resolution: Resolution): boolean {
    const key = wantKey(want);
    if (resolution.state === 'failed') {
      // Discovery itself failed (API server away): leave this watch as it is, ask again later.
      lastRoundFailed = true;
      return running.has(key);
    }
    if (resolution.state === 'missing') {
      if (running.has(key) && !suspect.has(key)) {
        // First answer: keep the watch; the next round (armed while suspect) decides.
        suspect.add(key);
        return true;
      }
      suspect.delete(key);
      if (unavailable.get(key) !== resolution.reason) {
        logger.warn(
          {
            resource: refKey(want.ref),
            namespace: want.namespace,
            origin: want.origin,
            reason: resolution.reason,
          },
          'state watch unavailable: the resource is not served by the API server; the other watches run on, and discovery is asked again',
        );
      }
      unavailable.set(key, resolution.reason);
      return false;
    }
    unavailable.delete(key);
    suspect.delete(key);
    if (!running.has(key)) start(want, resolution.resource, key);
    return true;
  }

  async function reconcileOnce(): Promise<void> {
    roundQueued = false;
    if (isAborted(lifetime.signal)) return;
    lastRoundFailed = false;
    const resolve = discovery.snapshot(lifetime.signal);
    const wanted = desired();
    const keep = new Set<string>();
    for (const want of wanted) {
      const resolution = await resolve(want.ref);
      if (isAborted(lifetime.signal)) return;
      if (applyResolution(want, resolution)) keep.add(wantKey(want));
    }
    for (const key of [...running.keys()]) {
      if (!keep.has(key)) {
        stopWatch(key, unavailable.has(key) ? 'resource removed' : 'no longer wanted');
      }
    }
    for (const key of [...unavailable.keys()]) {
      if (!wanted.some((want) => wantKey(want) === key)) unavailable.delete(key);
    }
    for (const key of [...suspect]) {
      if (!running.has(key)) suspect.delete(key);
    }
  }

  /** A round soon, unless one is queued and has not started yet. */
  function requestRound(): void {
    if (roundQueued) return;
    roundQueued = true;
    void reconcile();
  }

  function reconcile(): Promise<void> {
    reconciling = reconciling
      .then(reconcileOnce)
      .catch((err: unknown) => {
        lastRoundFailed = true;
        logger.warn(
          { reason: err instanceof Error ? err.message : String(err) },
          'state discovery failed; retrying at the next interval',
        );
      })
      .then(scheduleRound);
    return reconciling;
  }

  /** Arms the next round while a want waits on discovery; otherwise discovery sleeps. */
  function scheduleRound(): void {
    const waiting = unavailable.size > 0 || suspect.size > 0 || lastRoundFailed;
    if (!waiting || timer !== undefined || isAborted(lifetime.signal)) return;
    timer = setTimeout(() => {
      timer = undefined;
      requestRound();
    }, options.discoveryIntervalMs ?? DISCOVERY_INTERVAL_MS);
    timer.unref();
  }

  function watches(): StateWatchStatus[] {
    return desired().map((want): StateWatchStatus => {
      const key = wantKey(want);
      const base = { resource: refKey(want.ref), namespace: want.namespace, origin: want.origin };
      const reason = unavailable.get(key);
      if (reason !== undefined) return { ...base, state: 'unavailable', objects: 0, reason };
      const watch = running.get(key);
      if (watch === undefined) return { ...base, state: 'resolving', objects: 0 };
      const forbidden = watch.informer.forbidden();
      if (forbidden !== undefined) {
        return {
          ...base,
          state: 'forbidden',
          objects: watch.informer.size,
          reason: `missing verb ${forbidden.verb}`,
        };
      }
      const failure = watch.informer.failure();
      if (!watch.informer.synced() && failure?.code === 400) {
        // Refused as asked (a malformed selector): no retry will sync it, and the rest run on.
        return {
          ...base,
          state: 'unavailable',
          objects: 0,
          reason: `the API server refused the ${failure.verb}: ${failure.message}`,
        };
      }
      return {
        ...base,
        state: watch.informer.synced() ? 'synced' : 'syncing',
        objects: watch.informer.size,
      };
    });
  }

  /**
   * Not ready while a rule's watch is syncing. A denied watch (403) or an unavailable resource
   * does not hold readiness back (no retry would sync it, and the chart itself withholds Secrets
   * from the collector when an executor gate is on); both are named in the reason.
   */
  function health(): ComponentHealth {
    const all = watches().filter((w) => w.origin !== 'demand');
    const describe = (w: StateWatchStatus): string =>
      `${w.resource}${w.namespace === '' ? '' : ` (namespace ${w.namespace})`}${w.reason === undefined ? '' : `: ${w.reason}`}`;
    const label = (w: StateWatchStatus): string =>
      w.state === 'syncing' || w.state === 'resolving' ? 'not synced' : w.state;
    const syncing = all.filter((w) => w.state === 'syncing' || w.state === 'resolving');
    const reported = all.filter((w) => w.state === 'forbidden' || w.state === 'unavailable');
    const reason = [...syncing, ...reported].map((w) => `${label(w)}: ${describe(w)}`).join('; ');
    if (syncing.length > 0) return { state: 'unhealthy', reason };
    return reason === '' ? { state: 'ok' } : { state: 'ok', reason };
  }

  let closed: Promise<void> | undefined;
  return {
    name: 'state',
    start(signal: AbortSignal): Promise<void> {
      if (signal.aborted) lifetime.abort();
      else
        signal.addEventListener(
          'abort',
          () => {
            lifetime.abort();
          },
          { once: true },
        );
      void reconcile().finally(releaseHub);
      deps.clock.sleep(DISCOVERY_HOLD_MAX_MS, lifetime.signal).then(releaseHub, () => undefined);
      return Promise.resolve();
    },
    up: () => health().state === 'ok',
    health,
    watches,
    reconcileDemand(refs) {
      const seen = new Set<string>();
      demand = [];
      for (const ref of refs) {
        const key = refKey(ref);
        if (seen.has(key)) continue;
        seen.add(key);
        demand.push({
          ref,
          namespace: '',
          labelSelector: '',
          fieldSelector: '',
          resyncMs: options.state.resync_period,
          origin: 'demand',
          static: false,
        });
      }
      void reconcile();
    },
    close(): Promise<void> {
      closed ??= (async () => {
        lifetime.abort();
        releaseHub();
        clearTimeout(timer);
        await reconciling;
        await Promise.allSettled([...running.values()].map((watch) => watch.done));
        running.clear();
      })();
      return closed;
    },
  };
}
