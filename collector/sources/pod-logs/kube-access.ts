// The real Kubernetes access of the pod log source, built from a KubeConfig in main.ts.
import { PassThrough } from 'node:stream';
import { AppsV1Api, BatchV1Api, Log, type KubeConfig } from '@kubernetes/client-node';
import { kubePodListWatch } from './kube-pod-list-watch.js';
import type { PodListWatch } from './pod-reflector.js';
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

/** Opens `pods/log?timestamps=true`; the iterable ends with the stream. */
export interface PodLogReader {
  open(request: LogRequest, signal: AbortSignal): Promise<AsyncIterable<Buffer>>;
}

export interface PodLogKubeAccess {
  listWatch(namespace: string): PodListWatch;
  readonly logs: PodLogReader;
  readonly owners: OwnerLookup;
}

export function kubePodLogAccess(kc: KubeConfig): PodLogKubeAccess {
  const apps = kc.makeApiClient(AppsV1Api);
  const batch = kc.makeApiClient(BatchV1Api);
  const log = new Log(kc);
  return {
    listWatch: (namespace) => kubePodListWatch(kc, namespace),
    logs: {
      async open(request, signal) {
        const out = new PassThrough();
        // client-node pipes the response body into `out`, and pipe() passes no error on: a
        // connection cut mid-stream would leave `out` open forever. Fail it instead, so the
        // session ends and reconnects from its position.
        out.once('pipe', (body: NodeJS.ReadableStream) => {
          body.once('error', (err: Error) => {
            out.destroy(err);
          });
        });
        const controller = await log.log(request.namespace, request.pod, request.container, out, {
          follow: request.follow,
          timestamps: true,
          ...(request.tailLines !== undefined && request.tailLines > 0
            ? { tailLines: request.tailLines }
            : {}),
          ...(request.sinceTime ? { sinceTime: request.sinceTime.toISOString() } : {}),
          ...(request.previous === true ? { previous: true } : {}),
        });
        const stop = (): void => {
          controller.abort();
          out.end();
        };
        if (signal.aborted) stop();
        else signal.addEventListener('abort', stop, { once: true });
        out.once('close', () => {
          signal.removeEventListener('abort', stop);
        });
        return out;
      },
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
