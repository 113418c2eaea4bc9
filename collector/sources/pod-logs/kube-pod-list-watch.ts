// The pod log source's pods, through the collector's watch layer (collector/watch/).
import type { KubeConfig, V1Pod } from '@kubernetes/client-node';
import { kubeHttpFor } from '../../watch/kube-http.js';
import { kubeListWatch } from '../../watch/kube-list-watch.js';
import type { ListWatch } from '../../watch/list-watch.js';

export type PodListWatch = ListWatch<V1Pod>;

export function kubePodListWatch(kc: KubeConfig, namespace: string): PodListWatch {
  return kubeListWatch(
    kubeHttpFor(kc),
    { group: '', version: 'v1', resource: 'pods', namespaced: true, namespace },
    (object) => object as V1Pod,
  );
}
