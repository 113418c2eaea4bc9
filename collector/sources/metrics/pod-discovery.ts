// Pods found by their annotations, through the collector's shared list/watch layer
// (collector/watch/): a pod that starts, changes its annotations or goes away changes the
// targets at once, and a periodic resync re-evaluates every cached pod. Targets are scraped at
// the pod's IP, as Prometheus does, so the collector needs no pods/proxy grant (its identity
// never reaches into a pod through the API server).
import type { KubeConfig, V1Pod } from '@kubernetes/client-node';
import { minimatch } from 'minimatch';
import type { Logger } from 'pino';
import type { Clock } from '../../../shared/clock.js';
import { Informer, objectKey, type Cached } from '../../watch/informer.js';
import { kubeHttpFor } from '../../watch/kube-http.js';
import { kubeListWatch, type KubeObject } from '../../watch/kube-list-watch.js';
import type { ListWatch } from '../../watch/list-watch.js';
import type { MetricsPart } from './metrics-source.js';

/** A watched pod: only what discovery reads of it (annotations, ports, owner, phase, IP). */
export interface WatchedPod extends Cached {
  readonly pod: V1Pod;
}

/** What the cache keeps of a pod: never its env, volumes or anything else it does not read. */
export function watchedPod(object: KubeObject): WatchedPod {
  const pod = object as V1Pod;
  const metadata = pod.metadata ?? {};
  return {
    key: objectKey(metadata.namespace, metadata.name),
    uid: metadata.uid ?? '',
    resourceVersion: metadata.resourceVersion ?? '',
    pod: {
      metadata: defined({
        name: metadata.name,
        namespace: metadata.namespace,
        uid: metadata.uid,
        labels: metadata.labels,
        annotations: metadata.annotations,
        ownerReferences: metadata.ownerReferences,
        deletionTimestamp: metadata.deletionTimestamp,
      }),
      spec: {
        containers: (pod.spec?.containers ?? []).map((c) => ({
          name: c.name,
          ...(c.ports === undefined ? {} : { ports: c.ports }),
        })),
      },
      status: defined({ phase: pod.status?.phase, podIP: pod.status?.podIP }),
    },
  };
}

/** The object without its undefined fields (optional fields are absent, never undefined). */
function defined<T extends object>(object: T): { [K in keyof T]?: Exclude<T[K], undefined> } {
  return Object.fromEntries(Object.entries(object).filter(([, value]) => value !== undefined)) as {
    [K in keyof T]?: Exclude<T[K], undefined>;
  };
}

/** The pods of a namespace ('' = all) and label selector, through the watch layer. */
export function kubePodWatch(
  kube: KubeConfig,
  namespace: string,
  labelSelector: string,
): ListWatch<WatchedPod> {
  return kubeListWatch(
    kubeHttpFor(kube),
    { group: '', version: 'v1', resource: 'pods', namespaced: true, namespace, labelSelector },
    watchedPod,
  );
}

export interface DiscoveryOptions<T> {
  /** For log lines: "prometheus" or "profiles". */
  readonly what: string;
  readonly podNames: readonly string[];
  /** Every cached pod is evaluated again this often (changes apply at once anyway). */
  readonly refreshMs: number;
  /** The targets a running pod asks for (none when it is not annotated). */
  readonly targetsOf: (pod: RunningPod) => readonly T[];
  readonly apply: (targets: readonly T[]) => void;
}

export interface DiscoveryDeps {
  /** The rule's pods (namespace and label selector applied by the list/watch). */
  readonly pods: ListWatch<WatchedPod>;
  readonly clock: Clock;
  readonly logger: Logger;
}

/** A pod that can be dialled: Running, with an IP. */
export interface RunningPod {
  readonly namespace: string;
  readonly name: string;
  readonly ip: string;
  readonly annotations: Readonly<Record<string, string>>;
  readonly pod: V1Pod;
}

const GLOB = { dot: true, nocomment: true, nonegate: true } as const;

export class PodDiscovery<T> implements MetricsPart {
  readonly #options: DiscoveryOptions<T>;
  readonly #informer: Informer<WatchedPod>;
  #run: Promise<void> = Promise.resolve();
  #pending = false;

  constructor(options: DiscoveryOptions<T>, deps: DiscoveryDeps) {
    this.#options = options;
    this.#informer = new Informer(deps.pods, {
      name: `pods (${options.what} discovery)`,
      clock: deps.clock,
      logger: deps.logger,
      resyncMs: options.refreshMs,
      // Until the first list is applied the cache is partial: targets are applied once synced.
      onChange: () => {
        if (this.#informer.synced()) this.#schedule();
      },
      onSynced: () => {
        this.#schedule();
      },
      onForbidden: (err, verb) => {
        deps.logger.warn(
          { what: options.what, verb, reason: err instanceof Error ? err.message : String(err) },
          'pod discovery is not allowed to read pods; keeping the previous targets',
        );
      },
    });
  }

  start(signal: AbortSignal): void {
    this.#run = this.#informer.run(signal);
  }

  stopped(): Promise<void> {
    return this.#run;
  }

  /** True once the first pod list has been applied. */
  synced(): boolean {
    return this.#informer.synced();
  }

  /** One apply per burst of changes (a relist of hundreds of pods is one apply). */
  #schedule(): void {
    if (this.#pending) return;
    this.#pending = true;
    queueMicrotask(() => {
      this.#pending = false;
      this.#apply();
    });
  }

  #apply(): void {
    const { podNames, targetsOf, apply } = this.#options;
    const targets: T[] = [];
    for (const cached of this.#informer.values()) {
      const running = runningPod(cached.pod);
      if (running === undefined) continue;
      if (podNames.length > 0 && !podNames.some((glob) => minimatch(running.name, glob, GLOB))) {
        continue;
      }
      targets.push(...targetsOf(running));
    }
    apply(targets);
  }
}

function runningPod(pod: V1Pod): RunningPod | undefined {
  const metadata = pod.metadata ?? {};
  const ip = pod.status?.podIP ?? '';
  const running = pod.status?.phase === 'Running' && metadata.deletionTimestamp === undefined;
  if (!running || ip === '') return undefined;
  return {
    namespace: String(metadata.namespace),
    name: String(metadata.name),
    ip,
    annotations: metadata.annotations ?? {},
    pod,
  };
}

/** host:port with IPv6 in brackets. */
export function hostPort(ip: string, port: number): string {
  return ip.includes(':') ? `[${ip}]:${String(port)}` : `${ip}:${String(port)}`;
}

/** A TCP port from an annotation, or undefined when it is not one. */
export function portOf(text: string | undefined): number | undefined {
  if (text === undefined || !/^\d{1,5}$/.test(text.trim())) return undefined;
  const port = Number(text.trim());
  return port >= 1 && port <= 65535 ? port : undefined;
}

/**
 * The Prometheus scrape URL a pod's annotations ask for: prometheus.io/scrape "true", the port
 * from prometheus.io/port (else the first declared container port), prometheus.io/path
 * (default /metrics) and prometheus.io/scheme (http or https).
 */
export function prometheusUrl(pod: RunningPod): string | undefined {
  const a = pod.annotations;
  if (a['prometheus.io/scrape']?.trim().toLowerCase() !== 'true') return undefined;
  const declared = pod.pod.spec?.containers.flatMap((c) => c.ports ?? []).at(0)?.containerPort;
  const port = portOf(a['prometheus.io/port']) ?? declared;
  if (port === undefined) return undefined;
  const scheme = a['prometheus.io/scheme']?.trim().toLowerCase() === 'https' ? 'https' : 'http';
  let path = a['prometheus.io/path']?.trim() ?? '/metrics';
  if (!path.startsWith('/')) path = `/${path}`;
  return `${scheme}://${hostPort(pod.ip, port)}${path}`;
}

/** "<Kind>/<name>" of the pod's controller; a ReplicaSet of a Deployment names the Deployment. */
export function workloadOf(pod: RunningPod): string {
  const owner = pod.pod.metadata?.ownerReferences?.find((ref) => ref.controller === true);
  if (owner === undefined) return '';
  const hash = pod.pod.metadata?.labels?.['pod-template-hash'];
  if (owner.kind === 'ReplicaSet' && hash !== undefined && owner.name.endsWith(`-${hash}`)) {
    return `Deployment/${owner.name.slice(0, -hash.length - 1)}`;
  }
  return `${owner.kind}/${owner.name}`;
}

/**
 * The pprof base URL a pod's annotations ask for: kubexa.io/pprof-port (required),
 * kubexa.io/pprof-path (default /debug/pprof) and kubexa.io/pprof-scheme (http or https).
 */
export function pprofUrl(pod: RunningPod): string | undefined {
  const a = pod.annotations;
  const port = portOf(a['kubexa.io/pprof-port']);
  if (port === undefined) return undefined;
  const scheme = a['kubexa.io/pprof-scheme']?.trim().toLowerCase() === 'https' ? 'https' : 'http';
  let path = a['kubexa.io/pprof-path']?.trim() ?? '/debug/pprof';
  if (!path.startsWith('/')) path = `/${path}`;
  return `${scheme}://${hostPort(pod.ip, port)}${path}`;
}
