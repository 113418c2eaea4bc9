// The API calls node jobs make, as kubectl drain makes them: strategic-merge patches of
// spec.unschedulable, pod lists by spec.nodeName in pages of 500, policy/v1 evictions with
// deleteOptions, DaemonSet reads, and SelfSubjectAccessReviews for the executor's own RBAC.
import type { V1Node, V1Pod } from '@kubernetes/client-node';
import { isRecord, statusOf, type KubeHttp, type KubeResponse } from '../kube/kube-http.js';

/** kubectl's default list page size (cmdutil.DefaultChunkSize). */
const CHUNK_SIZE = 500;
const DRY_RUN_ALL = 'All';

export class KubeCallError extends Error {
  readonly what: string;
  readonly response: KubeResponse;
  constructor(what: string, response: KubeResponse) {
    const status = statusOf(response);
    super(`${what}: HTTP ${String(response.status)} ${status.reason} ${status.message}`.trim());
    this.name = 'KubeCallError';
    this.what = what;
    this.response = response;
  }
}

const enc = encodeURIComponent;

export interface NodeApi {
  getNode(name: string, signal?: AbortSignal): Promise<V1Node | undefined>;
  /** cordon: {"spec":{"unschedulable":true}}; uncordon: {"spec":{"unschedulable":null}}. */
  setUnschedulable(name: string, unschedulable: boolean, dryRun: boolean): Promise<V1Node>;
  listPodsOnNode(node: string, podSelector: string, signal?: AbortSignal): Promise<V1Pod[]>;
  getPod(namespace: string, name: string, signal?: AbortSignal): Promise<V1Pod | undefined>;
  evictPod(
    pod: { namespace: string; name: string },
    options: { gracePeriodSeconds: number | undefined; dryRun: boolean },
    signal?: AbortSignal,
  ): Promise<KubeResponse>;
  daemonSetExists(namespace: string, name: string): Promise<boolean>;
  /** The grants of `checks` the executor's identity lacks ("group/resource[/sub]:verb"). */
  missingGrants(checks: readonly string[]): Promise<string[]>;
}

export function createNodeApi(kube: KubeHttp): NodeApi {
  return {
    async getNode(name, signal) {
      const response = await kube.request({
        method: 'GET',
        path: `/api/v1/nodes/${enc(name)}`,
        ...(signal === undefined ? {} : { signal }),
      });
      if (response.status === 404) return undefined;
      if (response.status !== 200) throw new KubeCallError(`read node ${name}`, response);
      return response.body as V1Node;
    },
    async setUnschedulable(name, unschedulable, dryRun) {
      const response = await kube.request({
        method: 'PATCH',
        path: `/api/v1/nodes/${enc(name)}`,
        query: { dryRun: dryRun ? DRY_RUN_ALL : undefined },
        contentType: 'application/strategic-merge-patch+json',
        body: JSON.stringify({ spec: { unschedulable: unschedulable ? true : null } }),
      });
      if (response.status !== 200) {
        throw new KubeCallError(`${unschedulable ? 'cordon' : 'uncordon'} node ${name}`, response);
      }
      return response.body as V1Node;
    },
    async listPodsOnNode(node, podSelector, signal) {
      const pods: V1Pod[] = [];
      let next: string | undefined;
      do {
        const response = await kube.request({
          method: 'GET',
          path: '/api/v1/pods',
          query: {
            fieldSelector: `spec.nodeName=${node}`,
            labelSelector: podSelector === '' ? undefined : podSelector,
            limit: String(CHUNK_SIZE),
            continue: next,
          },
          ...(signal === undefined ? {} : { signal }),
        });
        if (response.status !== 200) throw new KubeCallError(`list pods on ${node}`, response);
        const body = isRecord(response.body) ? response.body : {};
        pods.push(...((body['items'] as V1Pod[] | undefined) ?? []));
        const metadata = isRecord(body['metadata']) ? body['metadata'] : {};
        next =
          typeof metadata['continue'] === 'string' && metadata['continue'] !== ''
            ? metadata['continue']
            : undefined;
      } while (next !== undefined);
      return pods;
    },
    async getPod(namespace, name, signal) {
      // A list narrowed to one name, not a GET: rbac.nodeOps grants pods list, not get (a drain
      // reads no pod it could not list anyway).
      const response = await kube.request({
        method: 'GET',
        path: `/api/v1/namespaces/${enc(namespace)}/pods`,
        query: { fieldSelector: `metadata.name=${name}` },
        ...(signal === undefined ? {} : { signal }),
      });
      if (response.status !== 200)
        throw new KubeCallError(`read pod ${namespace}/${name}`, response);
      const body = isRecord(response.body) ? response.body : {};
      const items = (body['items'] as V1Pod[] | undefined) ?? [];
      return items[0];
    },
    evictPod(pod, options, signal) {
      const deleteOptions: Record<string, unknown> = {};
      if (options.gracePeriodSeconds !== undefined) {
        deleteOptions['gracePeriodSeconds'] = options.gracePeriodSeconds;
      }
      if (options.dryRun) deleteOptions['dryRun'] = [DRY_RUN_ALL];
      return kube.request({
        method: 'POST',
        path: `/api/v1/namespaces/${enc(pod.namespace)}/pods/${enc(pod.name)}/eviction`,
        query: { dryRun: options.dryRun ? DRY_RUN_ALL : undefined },
        body: JSON.stringify({
          apiVersion: 'policy/v1',
          kind: 'Eviction',
          metadata: { name: pod.name, namespace: pod.namespace },
          deleteOptions,
        }),
        ...(signal === undefined ? {} : { signal }),
      });
    },
    async daemonSetExists(namespace, name) {
      const response = await kube.request({
        method: 'GET',
        path: `/apis/apps/v1/namespaces/${enc(namespace)}/daemonsets/${enc(name)}`,
      });
      if (response.status === 404) return false;
      if (response.status !== 200)
        throw new KubeCallError(`read DaemonSet ${namespace}/${name}`, response);
      return true;
    },
    async missingGrants(checks) {
      const missing: string[] = [];
      for (const check of checks) {
        const [resourcePart = '', verb = ''] = check.split(':');
        const [group = '', resource = '', subresource] = resourcePart.split('/');
        const response = await kube.request({
          method: 'POST',
          path: '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews',
          body: JSON.stringify({
            apiVersion: 'authorization.k8s.io/v1',
            kind: 'SelfSubjectAccessReview',
            spec: {
              resourceAttributes: {
                group,
                resource,
                verb,
                ...(subresource === undefined ? {} : { subresource }),
              },
            },
          }),
        });
        if (response.status !== 201 && response.status !== 200) {
          throw new KubeCallError('SelfSubjectAccessReview', response);
        }
        const body = isRecord(response.body) ? response.body : {};
        const status = isRecord(body['status']) ? body['status'] : {};
        if (status['allowed'] !== true) missing.push(check);
      }
      return missing;
    },
  };
}
