// The real Kubernetes access of the pod log source, built from a KubeConfig in main.ts.
import type { KubeConfig, V1OwnerReference, V1Pod } from '@kubernetes/client-node';
import { kubeHttpFor } from '../../watch/kube-http.js';
import type { WatchFeed } from '../../watch/reflector.js';
import type { WatchHub } from '../../watch/shared-watch.js';
import { PodLogHttp, type PodLogHttpLogger } from './pod-log-http.js';
import { kubePodListWatch, type PodListWatch } from './kube-pod-list-watch.js';
import type { OwnerLookup } from './workload.js';

export interface LogRequest {
  readonly namespace: string;
  readonly pod: string;
  readonly container: string;
  readonly follow: boolean;
  readonly tailLines?: number;
  readonly sinceTime?: Date;
  /** The previous (terminated) instance of the container: read after a restart. */
  readonly previous?: boolean;
}

/** Reads `pods/log?timestamps=true` (pod-log-http.ts). */
export interface PodLogReader {
  /**
   * One connection: each body chunk goes to `onChunk` as it arrives, synchronously (the chunk is
   * the caller's only during the call). Resolves when the server ends the body or `signal`
   * aborts; rejects when the request is refused (an error with `statusCode`) or the connection
   * is cut.
   */
  read(request: LogRequest, signal: AbortSignal, onChunk: (chunk: Buffer) => void): Promise<void>;
}

export interface PodLogKubeAccess {
  listWatch(namespace: string): PodListWatch;
  /** The namespace's pods from the collector's shared watch (used instead of listWatch). */
  pods?(namespace: string): WatchFeed<V1Pod>;
  readonly logs: PodLogReader;
  readonly owners: OwnerLookup;
}

interface OwnedObject {
  readonly metadata?: { readonly ownerReferences?: readonly V1OwnerReference[] };
}

/** `watches`: the collector's shared watches; the pods are then listed and watched there. */
export function kubePodLogAccess(
  kc: KubeConfig,
  watches?: WatchHub,
  logger?: PodLogHttpLogger,
): PodLogKubeAccess {
  // Owner lookups over one TLS agent (sessions resumed), not a typed client's agent per request.
  const rest = kubeHttpFor(kc);
  // Log reads: HTTP/2 streams on a few shared TLS connections (pod-log-http.ts).
  const http = new PodLogHttp(kc, undefined, logger === undefined ? {} : { logger });
  return {
    listWatch: (namespace) => kubePodListWatch(kc, namespace),
    ...(watches === undefined
      ? {}
      : {
          pods: (namespace: string) =>
            watches.feed(
              { group: '', version: 'v1', resource: 'pods', namespaced: true, namespace },
              (object) => object as V1Pod,
            ),
        }),
    logs: {
      read: (request, signal, onChunk) => http.read(request, signal, onChunk),
    },
    owners: async (kind, namespace, name, signal) => {
      const collection = kind === 'ReplicaSet' ? 'apps/v1/namespaces' : 'batch/v1/namespaces';
      const plural = kind === 'ReplicaSet' ? 'replicasets' : 'jobs';
      const path = `/apis/${collection}/${encodeURIComponent(namespace)}/${plural}/${encodeURIComponent(name)}`;
      const object = (await rest.getJson({ path }, signal)) as OwnedObject;
      return object.metadata?.ownerReferences?.find((ref) => ref.controller === true);
    },
  };
}
