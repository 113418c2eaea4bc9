// The collector's reads of metrics.k8s.io (PodMetrics, NodeMetrics) and, for rules with
// selectors, of the pods they select: behind an interface so tests and a later shared watch layer
// can stand in for the API server.
import type { KubeConfig } from '@kubernetes/client-node';
import { kubeHttpFor, KubeRequestError } from '../../watch/kube-http.js';

export interface ContainerUsage {
  readonly name: string;
  readonly usage: { readonly cpu?: string; readonly memory?: string };
}

/** One item of a PodMetricsList or NodeMetricsList, as metrics-server serves it. */
export interface UsageItem {
  readonly metadata: { readonly name: string; readonly namespace?: string };
  /** RFC 3339: the end of the window the usage was measured over. */
  readonly timestamp?: string;
  /** A Go duration, e.g. "10.5s". */
  readonly window?: string;
  /** PodMetrics. */
  readonly containers?: readonly ContainerUsage[];
  /** NodeMetrics. */
  readonly usage?: { readonly cpu?: string; readonly memory?: string };
}

export interface PodSelection {
  readonly namespace: string;
  readonly labelSelector: string;
  readonly fieldSelector: string;
}

export interface MetricsApi {
  /** PodMetrics in `namespace` ("" = every namespace). */
  listPodMetrics(namespace: string, signal: AbortSignal): Promise<readonly UsageItem[]>;
  listNodeMetrics(signal: AbortSignal): Promise<readonly UsageItem[]>;
  /** "namespace/name" of the pods a rule's selectors select. */
  listSelectedPods(selection: PodSelection, signal: AbortSignal): Promise<ReadonlySet<string>>;
}

const GROUP = 'metrics.k8s.io';
const VERSION = 'v1beta1';

interface ItemList {
  readonly items?: readonly UsageItem[];
}

interface PodList {
  readonly items?: readonly { readonly metadata?: { namespace?: string; name?: string } }[];
}

/**
 * Over the collector's own HTTP client (watch/kube-http.ts): one TLS agent for every scrape, so
 * a scrape resumes the TLS session; client-node's typed clients built a new agent, a new TLS
 * context and a full handshake for each request (an idle collector's CPU, README's Sizing).
 */
export function kubeMetricsApi(kube: KubeConfig): MetricsApi {
  const http = kubeHttpFor(kube);
  const base = `/apis/${GROUP}/${VERSION}`;
  const items = async (path: string, signal: AbortSignal): Promise<readonly UsageItem[]> =>
    ((await http.getJson({ path }, signal)) as ItemList).items ?? [];
  return {
    listPodMetrics: (namespace, signal) =>
      items(
        namespace === ''
          ? `${base}/pods`
          : `${base}/namespaces/${encodeURIComponent(namespace)}/pods`,
        signal,
      ),
    listNodeMetrics: (signal) => items(`${base}/nodes`, signal),
    async listSelectedPods({ namespace, labelSelector, fieldSelector }, signal) {
      const list = (await http.getJson(
        {
          path:
            namespace === ''
              ? '/api/v1/pods'
              : `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods`,
          query: {
            labelSelector: labelSelector === '' ? undefined : labelSelector,
            fieldSelector: fieldSelector === '' ? undefined : fieldSelector,
          },
        },
        signal,
      )) as PodList;
      return new Set(
        (list.items ?? []).map(
          (pod) => `${pod.metadata?.namespace ?? ''}/${pod.metadata?.name ?? ''}`,
        ),
      );
    },
  };
}

/**
 * True when the error says metrics.k8s.io is not served (no APIService: 404; an APIService whose
 * backend is down: 503), as opposed to a transient or permission error.
 */
export function isMetricsApiUnavailable(err: unknown): boolean {
  if (err instanceof KubeRequestError) {
    if (err.statusCode === 404 || err.statusCode === 503) return true;
  }
  const message = err instanceof Error ? err.message : String(err);
  return (
    message.includes('the server could not find the requested resource') ||
    /metrics\.k8s\.io.*(unavailable|not found)/i.test(message)
  );
}

/** A short, request-free description of a failed call, for one log line. */
export function describeApiError(err: unknown): string {
  if (err instanceof KubeRequestError) {
    return `HTTP ${String(err.statusCode)}${err.reason === '' ? '' : `: ${err.reason}`}`;
  }
  return (err instanceof Error ? err.message : String(err)).split('\n')[0] ?? 'unknown error';
}
