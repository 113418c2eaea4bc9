// SelfSubjectAccessReviews of the collector's own identity, cluster-wide, per resource: may it
// list, and (only when it may list) watch. A review that errors marks the resource probe_failed.
import type { KubeRest } from '../query/kube-rest.js';
import type { DiscoveredResource } from './discovery.js';
import { mapLimit } from './map-limit.js';

export const PROBE_WORKERS = 8;

export interface AccessVerdict {
  readonly canList: boolean;
  readonly canWatch: boolean;
  readonly probeFailed: boolean;
}

async function allowed(
  rest: KubeRest,
  resource: DiscoveredResource,
  verb: 'list' | 'watch',
  signal: AbortSignal,
): Promise<boolean> {
  const body = {
    apiVersion: 'authorization.k8s.io/v1',
    kind: 'SelfSubjectAccessReview',
    spec: {
      resourceAttributes: {
        group: resource.group,
        version: resource.version,
        resource: resource.resource,
        verb,
      },
    },
  };
  const response = await rest.request({
    method: 'POST',
    path: '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews',
    body: Buffer.from(JSON.stringify(body)),
    maxBodyBytes: 64 * 1024,
    signal,
  });
  if (response.status !== 201 && response.status !== 200) {
    throw new Error(`SelfSubjectAccessReview: HTTP ${response.status}`);
  }
  const review = JSON.parse(response.body.toString('utf8')) as { status?: { allowed?: boolean } };
  return review.status?.allowed === true;
}

export function probeAccess(
  rest: KubeRest,
  resources: readonly DiscoveredResource[],
  signal: AbortSignal,
): Promise<AccessVerdict[]> {
  return mapLimit(resources, PROBE_WORKERS, async (resource) => {
    try {
      const canList = await allowed(rest, resource, 'list', signal);
      const canWatch = canList && (await allowed(rest, resource, 'watch', signal));
      return { canList, canWatch, probeFailed: false };
    } catch {
      signal.throwIfAborted();
      return { canList: false, canWatch: false, probeFailed: true };
    }
  });
}
