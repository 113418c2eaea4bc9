// The collector's reads of metrics.k8s.io (PodMetrics, NodeMetrics) and, for rules with
// selectors, of the pods they select: behind an interface so tests and a later shared watch layer
// can stand in for the API server.
import {
  ApiException,
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
} from '@kubernetes/client-node';

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

export function kubeMetricsApi(kube: KubeConfig): MetricsApi {
  const custom = kube.makeApiClient(CustomObjectsApi);
  const core = kube.makeApiClient(CoreV1Api);
  return {
    async listPodMetrics(namespace) {
      const list = (
        namespace === ''
          ? await custom.listClusterCustomObject({ group: GROUP, version: VERSION, plural: 'pods' })
          : await custom.listNamespacedCustomObject({
              group: GROUP,
              version: VERSION,
              namespace,
              plural: 'pods',
            })
      ) as ItemList;
      return list.items ?? [];
    },
    async listNodeMetrics() {
      const list = (await custom.listClusterCustomObject({
        group: GROUP,
        version: VERSION,
        plural: 'nodes',
      })) as ItemList;
      return list.items ?? [];
    },
    async listSelectedPods({ namespace, labelSelector, fieldSelector }) {
      const selectors = {
        ...(labelSelector === '' ? {} : { labelSelector }),
        ...(fieldSelector === '' ? {} : { fieldSelector }),
      };
      const list =
        namespace === ''
          ? await core.listPodForAllNamespaces(selectors)
          : await core.listNamespacedPod({ namespace, ...selectors });
      return new Set(
        list.items.map((pod) => `${pod.metadata?.namespace ?? ''}/${pod.metadata?.name ?? ''}`),
      );
    },
  };
}

/**
 * True when the error says metrics.k8s.io is not served (no APIService: 404; an APIService whose
 * backend is down: 503), as opposed to a transient or permission error.
 */
export function isMetricsApiUnavailable(err: unknown): boolean {
  if (err instanceof ApiException) {
    if (err.code === 404 || err.code === 503) return true;
  }
  const message = err instanceof Error ? err.message : String(err);
  return (
    message.includes('the server could not find the requested resource') ||
    /metrics\.k8s\.io.*(unavailable|not found)/i.test(message)
  );
}

/** A short, request-free description of a failed call, for one log line. */
export function describeApiError(err: unknown): string {
  if (err instanceof ApiException) {
    const body = typeof err.body === 'string' ? err.body : JSON.stringify(err.body);
    let reason: string;
    try {
      reason = (JSON.parse(body) as { message?: string }).message ?? '';
    } catch {
      reason = body.slice(0, 200);
    }
    return `HTTP ${String(err.code)}${reason === '' ? '' : `: ${reason}`}`;
  }
  return (err instanceof Error ? err.message : String(err)).split('\n')[0] ?? 'unknown error';
}
