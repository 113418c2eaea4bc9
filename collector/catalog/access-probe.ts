// SelfSubjectAccessReviews of the collector's own identity, cluster-wide, per resource: may it
// list, and (only when it may list) watch. A review that errors marks the resource probe_failed.
// First two reviews of every resource in every group ("*"): an identity granted list and watch on
// everything (the chart's default ClusterRole) is answered by those two, not by a review per
// resource and verb (about a hundred requests at each sweep on a small cluster, most of an idle
// collector's CPU in its first minute).
import type { KubeRest } from '../query/kube-rest.js';
import type { DiscoveredResource } from './discovery.js';
import { mapLimit } from './map-limit.js';

export const PROBE_WORKERS = 8;

export interface AccessVerdict {
  readonly canList: boolean;
  readonly canWatch: boolean;
  readonly probeFailed: boolean;
}

/** Every resource of every group: RBAC allows it only to a rule that grants "*" in "*". */
const EVERY_RESOURCE = { group: '*', version: '', resource: '*' } as const;

async function allowed(
  rest: KubeRest,
  resource: Pick<DiscoveredResource, 'group' | 'version' | 'resource'>,
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

/** Whether the identity may list and watch every resource; false when a review fails. */
async function mayWatchEverything(rest: KubeRest, signal: AbortSignal): Promise<boolean> {
  try {
    const [canList, canWatch] = await Promise.all([
      allowed(rest, EVERY_RESOURCE, 'list', signal),
      allowed(rest, EVERY_RESOURCE, 'watch', signal),
    ]);
    return canList && canWatch;
  } catch {
    signal.throwIfAborted();
    return false;
  }
}

export async function probeAccess(
  rest: KubeRest,
  resources: readonly DiscoveredResource[],
  signal: AbortSignal,
): Promise<AccessVerdict[]> {
  if (await mayWatchEverything(rest, signal)) {
    return resources.map(() => ({ canList: true, canWatch: true, probeFailed: false }));
  }
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
