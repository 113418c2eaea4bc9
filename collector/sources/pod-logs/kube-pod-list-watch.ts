// The real PodListWatch over @kubernetes/client-node 1.x: CoreV1Api list and Watch.
import { CoreV1Api, Watch, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import type { PodListWatch } from './pod-reflector.js';

/** The server ends each watch after this many seconds (jittered), so none lives forever. */
const WATCH_TIMEOUT_SECONDS = 300;

export function kubePodListWatch(kc: KubeConfig, namespace: string): PodListWatch {
  const core = kc.makeApiClient(CoreV1Api);
  const path = namespace === '' ? '/api/v1/pods' : `/api/v1/namespaces/${namespace}/pods`;
  return {
    async list() {
      const list =
        namespace === ''
          ? await core.listPodForAllNamespaces({ resourceVersion: '0' })
          : await core.listNamespacedPod({ namespace, resourceVersion: '0' });
      return { items: list.items, resourceVersion: list.metadata?.resourceVersion ?? '' };
    },
    watch(resourceVersion, onEvent, signal) {
      return new Promise<void>((resolve, reject) => {
        let failure: unknown;
        const done = (err: unknown): void => {
          const cause = failure ?? err;
          if (cause && !signal.aborted)
            reject(cause instanceof Error ? cause : new Error('watch failed'));
          else resolve();
        };
        const timeoutSeconds = Math.round(WATCH_TIMEOUT_SECONDS * (1 + Math.random() / 2));
        new Watch(kc)
          .watch(
            path,
            { resourceVersion, allowWatchBookmarks: true, timeoutSeconds },
            (type: string, object: unknown) => {
              try {
                if (type === 'ERROR') {
                  const status = object as { code?: number; message?: string };
                  failure = Object.assign(new Error(status.message ?? 'watch error'), {
                    code: status.code ?? 500,
                  });
                  controller?.abort();
                  return;
                }
                onEvent(type, object as V1Pod);
              } catch (err: unknown) {
                failure = err;
                controller?.abort();
              }
            },
            done,
          )
          .then((c) => {
            controller = c;
            if (signal.aborted) c.abort();
            else {
              signal.addEventListener(
                'abort',
                () => {
                  c.abort();
                },
                { once: true },
              );
            }
          })
          .catch(reject);
        let controller: AbortController | undefined;
      });
    },
  };
}
