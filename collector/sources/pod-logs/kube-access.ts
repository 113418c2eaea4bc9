// The real Kubernetes access of the pod log source, built from a KubeConfig in main.ts.
import { AppsV1Api, BatchV1Api, type KubeConfig } from '@kubernetes/client-node';
import { PodLogHttp } from './pod-log-http.js';
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
  readonly logs: PodLogReader;
  readonly owners: OwnerLookup;
}

export function kubePodLogAccess(kc: KubeConfig): PodLogKubeAccess {
  const apps = kc.makeApiClient(AppsV1Api);
  const batch = kc.makeApiClient(BatchV1Api);
  const http = new PodLogHttp(kc);
  return {
    listWatch: (namespace) => kubePodListWatch(kc, namespace),
    logs: {
      read: (request, signal, onChunk) => http.read(request, signal, onChunk),
    },
    owners: async (kind, namespace, name) => {
      const object =
        kind === 'ReplicaSet'
          ? await apps.readNamespacedReplicaSet({ namespace, name })
          : await batch.readNamespacedJob({ namespace, name });
      return object.metadata?.ownerReferences?.find((ref) => ref.controller);
    },
  };
}
