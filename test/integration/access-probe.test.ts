// The capability catalog's access reviews against the real API server, counted: an identity that
// may list and watch every resource (the chart's default ClusterRole; the admin here) is answered
// by two reviews of "*", not two per resource (an idle collector's CPU in its first minute); an
// identity without that grant still gets one review per resource and verb, with the same verdicts.
import type { KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { probeAccess } from '../../collector/catalog/access-probe.js';
import type { DiscoveredResource } from '../../collector/catalog/discovery.js';
import { createKubeRest, type KubeRest } from '../../collector/query/kube-rest.js';
import { serviceAccountIdentity } from '../helpers/console-executor.js';
import { createTestNamespace, loadKubeConfig, type TestNamespace } from '../helpers/kube.js';

const RESOURCES: readonly DiscoveredResource[] = [
  { group: '', version: 'v1', resource: 'pods', kind: 'Pod', namespaced: true },
  { group: '', version: 'v1', resource: 'services', kind: 'Service', namespaced: true },
  { group: '', version: 'v1', resource: 'secrets', kind: 'Secret', namespaced: true },
  { group: 'apps', version: 'v1', resource: 'deployments', kind: 'Deployment', namespaced: true },
  { group: '', version: 'v1', resource: 'nodes', kind: 'Node', namespaced: false },
];

let admin: KubeConfig;
let ns: TestNamespace;

beforeAll(async () => {
  admin = loadKubeConfig(inject('kubeconfigPath'));
  ns = await createTestNamespace(admin, 'access-probe');
});

afterAll(async () => {
  await ns.delete();
});

/** The real REST client, counting the reviews it sends. */
function countingRest(kube: KubeConfig): { rest: KubeRest; reviews: () => number } {
  const real = createKubeRest(kube);
  let reviews = 0;
  return {
    rest: {
      request: (request) => {
        if (request.path.endsWith('/selfsubjectaccessreviews')) reviews++;
        return real.request(request);
      },
      close: () => {
        real.close();
      },
    },
    reviews: () => reviews,
  };
}

describe('access reviews of the capability catalog', () => {
  it('answers an identity that may list and watch everything with two reviews', async () => {
    const { rest, reviews } = countingRest(admin);
    try {
      const verdicts = await probeAccess(rest, RESOURCES, new AbortController().signal);
      expect(verdicts).toEqual(
        RESOURCES.map(() => ({ canList: true, canWatch: true, probeFailed: false })),
      );
      expect(reviews()).toBe(2);
    } finally {
      rest.close();
    }
  });

  it('reviews each resource for an identity without that grant, with its verdicts', async () => {
    // May get pods in its own namespace only: no cluster-wide list of anything.
    const kube = await serviceAccountIdentity(admin, ns.name, 'narrow-reader', false);
    const { rest, reviews } = countingRest(kube);
    try {
      const verdicts = await probeAccess(rest, RESOURCES, new AbortController().signal);
      expect(verdicts).toEqual(
        RESOURCES.map(() => ({ canList: false, canWatch: false, probeFailed: false })),
      );
      // The two of "*", then a list review per resource (watch only after a list allowed).
      expect(reviews()).toBe(2 + RESOURCES.length);
    } finally {
      rest.close();
    }
  });
});
