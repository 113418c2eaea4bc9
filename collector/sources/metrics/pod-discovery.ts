// Pods found by their annotations: relisted every `refresh` and turned into targets scraped at
// the pod's IP, as Prometheus does, so the collector needs no pods/proxy grant (its identity
// never reaches into a pod through the API server). A plain periodic list behind PodLister for
// now; the shared watch layer can stand in for it later.
import { CoreV1Api, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { minimatch } from 'minimatch';
import type { Logger } from 'pino';
import type { Clock } from '../../../shared/clock.js';
import type { MetricsPart } from './metrics-source.js';
import { describeApiError } from './metrics-api.js';
import { runLoop } from './schedule.js';

export interface PodLister {
  list(namespace: string, labelSelector: string, signal: AbortSignal): Promise<readonly V1Pod[]>;
}

export function kubePodLister(kube: KubeConfig): PodLister {
  const core = kube.makeApiClient(CoreV1Api);
  return {
    async list(namespace, labelSelector) {
      const selector = labelSelector === '' ? {} : { labelSelector };
      const list =
        namespace === ''
          ? await core.listPodForAllNamespaces(selector)
          : await core.listNamespacedPod({ namespace, ...selector });
      return list.items;
    },
  };
}

export interface DiscoveryOptions<T> {
  /** For log lines: "prometheus" or "profiles". */
  readonly what: string;
  readonly namespace: string;
  readonly labelSelector: string;
  readonly podNames: readonly string[];
  readonly refreshMs: number;
  /** The targets a running pod asks for (none when it is not annotated). */
  readonly targetsOf: (pod: RunningPod) => readonly T[];
  readonly apply: (targets: readonly T[]) => void;
}

export interface DiscoveryDeps {
  readonly lister: PodLister;
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
  readonly #deps: DiscoveryDeps;
  #loop: Promise<void> = Promise.resolve();
  #lastError = '';

  constructor(options: DiscoveryOptions<T>, deps: DiscoveryDeps) {
    this.#options = options;
    this.#deps = deps;
  }

  start(signal: AbortSignal): void {
    this.#loop = runLoop(
      { clock: this.#deps.clock, signal, initialDelayMs: 0 },
      async (loopSignal) => {
        await this.refresh(loopSignal);
        return this.#options.refreshMs;
      },
      (err) => {
        this.#deps.logger.error({ err, what: this.#options.what }, 'pod discovery bug');
        return this.#options.refreshMs;
      },
    );
  }

  stopped(): Promise<void> {
    return this.#loop;
  }

  /** Lists once and applies the targets; a failed list keeps the previous targets. */
  async refresh(signal: AbortSignal): Promise<void> {
    const { namespace, labelSelector, podNames, targetsOf, apply, what } = this.#options;
    let pods;
    try {
      pods = await this.#deps.lister.list(namespace, labelSelector, signal);
    } catch (err: unknown) {
      if (signal.aborted) return;
      const reason = describeApiError(err);
      if (reason !== this.#lastError) {
        this.#lastError = reason;
        this.#deps.logger.warn(
          { what, reason },
          'pod discovery list failed; keeping the previous targets',
        );
      }
      return;
    }
    this.#lastError = '';
    const targets: T[] = [];
    for (const pod of pods) {
      const running = runningPod(pod);
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
