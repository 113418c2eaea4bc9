// The state and events watches' discovery (collector/watch/discovery.ts) against the real API
// server: a refresh reads the aggregated documents with the last answer's ETag, so while nothing
// is installed or removed it is one request per root answered 304, with nothing read per group
// version; a CRD installed is seen at the next refresh; a group version the aggregator marks
// Stale resolves as failed (a running watch is left as it is), one never served as missing; and
// a server without aggregated discovery, or a proxy that refuses its media type, gets the read
// per group version with the same answers.
import { ApiextensionsV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { Discovery, type Resolution, type ResourceRef } from '../../collector/watch/discovery.js';
import { KubeHttp, KubeRequestError } from '../../collector/watch/kube-http.js';
import {
  createTestNamespace,
  eventually,
  loadKubeConfig,
  type TestNamespace,
} from '../helpers/kube.js';
import { crdManifest, registerDeadApiService } from '../helpers/test-apis.js';

const kc = loadKubeConfig(inject('kubeconfigPath'));
const crds = kc.makeApiClient(ApiextensionsV1Api);
const WAIT = { timeoutMs: 60_000, intervalMs: 500 };

let ns: TestNamespace;
const cleanups: (() => Promise<unknown>)[] = [];
beforeAll(async () => {
  ns = await createTestNamespace(kc, 'discovery');
});
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
  await ns.delete();
});

type DiscoveryHttp = ConstructorParameters<typeof Discovery>[0];

/** A client of its own, closed after the file. */
function testClient(): KubeHttp {
  const http = new KubeHttp(kc);
  cleanups.push(() => {
    http.close();
    return Promise.resolve();
  });
  return http;
}

/** A real client that records what discovery asked: conditional answers and per-GV reads. */
function recording(
  http: KubeHttp,
  rewrite: (accept: string | undefined) => string | undefined = (accept) => accept,
) {
  const conditional: string[] = [];
  const perGroupVersion: string[] = [];
  const client: DiscoveryHttp = {
    getJson: (request, signal) => {
      perGroupVersion.push(request.path);
      return http.getJson(request, signal);
    },
    getJsonIfChanged: async (request, ifNoneMatch, signal) => {
      const accept = rewrite(request.accept);
      const answer = await http.getJsonIfChanged(
        { ...request, ...(accept === undefined ? {} : { accept }) },
        ifNoneMatch,
        signal,
      );
      conditional.push(`${request.path} ${answer.changed ? 'changed' : 'unchanged'}`);
      return answer;
    },
  };
  return {
    client,
    conditional,
    perGroupVersion,
    reset() {
      conditional.length = 0;
      perGroupVersion.length = 0;
    },
  };
}

const PODS: ResourceRef = { group: '', version: 'v1', resource: 'pods' };
const DEPLOYMENTS: ResourceRef = { group: 'apps', version: 'v1', resource: 'deployments' };
const NAMESPACES: ResourceRef = { group: '', version: 'v1', resource: 'namespaces' };

async function resolveAll(
  discovery: Discovery,
  refs: readonly ResourceRef[],
): Promise<Resolution[]> {
  const resolve = discovery.snapshot(AbortSignal.timeout(20_000));
  const out: Resolution[] = [];
  for (const ref of refs) out.push(await resolve(ref));
  return out;
}

function available(resolution: Resolution | undefined) {
  expect(resolution?.state, JSON.stringify(resolution)).toBe('available');
  return resolution?.state === 'available' ? resolution.resource : undefined;
}

describe('discovery for the watches, against the real API server', () => {
  it('a refresh with nothing changed is one request per root answered 304; a CRD installed is seen at the next one', async () => {
    const http = testClient();
    const recorder = recording(http);
    const discovery = new Discovery(recorder.client);

    const [pods, deployments, namespaces] = await resolveAll(discovery, [
      PODS,
      DEPLOYMENTS,
      NAMESPACES,
    ]);
    expect(available(pods)).toMatchObject({ kind: 'Pod', namespaced: true });
    expect(available(pods)?.verbs).toEqual(expect.arrayContaining(['list', 'watch']));
    expect(available(deployments)).toMatchObject({ kind: 'Deployment', namespaced: true });
    expect(available(namespaces)).toMatchObject({ kind: 'Namespace', namespaced: false });
    // One request per root for three refs in two group versions, and no read per group version.
    expect(recorder.conditional).toEqual(['/api changed', '/apis changed']);
    expect(recorder.perGroupVersion).toEqual([]);

    // Other files install and remove CRDs on this cluster while this runs: a refresh that finds
    // /apis changed is retried until one finds both roots unchanged.
    await eventually(
      'a refresh with both roots answered 304',
      async () => {
        recorder.reset();
        const again = await resolveAll(discovery, [PODS, DEPLOYMENTS]);
        expect(again.map((r) => r.state)).toEqual(['available', 'available']);
        const both = ['/api unchanged', '/apis unchanged'];
        return JSON.stringify(recorder.conditional) === JSON.stringify(both) ? true : undefined;
      },
      WAIT,
    );
    expect(recorder.perGroupVersion).toEqual([]);

    // A CRD installed now is served at the next refresh that finds /apis changed.
    const group = `d${String(Date.now())}.kubexa.test`;
    const ref: ResourceRef = { group, version: 'v1', resource: 'gadgets' };
    const [before] = await resolveAll(discovery, [ref]);
    expect(before).toEqual({
      state: 'missing',
      reason: `the API server does not serve ${group}/v1`,
    });
    await crds.createCustomResourceDefinition({
      body: crdManifest({ group, plural: 'gadgets', kind: 'Gadget', scope: 'Cluster' }),
    });
    cleanups.push(() => crds.deleteCustomResourceDefinition({ name: `gadgets.${group}` }));
    recorder.reset();
    const gadget = await eventually(
      'the CRD in discovery',
      async () => {
        const [resolution] = await resolveAll(discovery, [ref]);
        return resolution?.state === 'available' ? resolution.resource : undefined;
      },
      WAIT,
    );
    expect(gadget).toMatchObject({ kind: 'Gadget', namespaced: false });
    expect(recorder.conditional).toContain('/apis changed');
    expect(recorder.perGroupVersion).toEqual([]);
  });

  it('a resource or group version never served is missing, with a reason that names it', async () => {
    const http = testClient();
    const discovery = new Discovery(http);
    const [noResource, noGroup] = await resolveAll(discovery, [
      { group: '', version: 'v1', resource: 'gadgets' },
      { group: 'nothing.kubexa.test', version: 'v1', resource: 'gadgets' },
    ]);
    expect(noResource).toEqual({ state: 'missing', reason: 'v1 has no resource "gadgets"' });
    expect(noGroup).toEqual({
      state: 'missing',
      reason: 'the API server does not serve nothing.kubexa.test/v1',
    });
  });

  it('a group version the aggregator marks Stale resolves as failed, not missing', async () => {
    const group = `stale${String(Date.now() % 1_000_000)}.kubexa.test`;
    cleanups.push(await registerDeadApiService(kc, ns.name, group));
    const http = testClient();
    const recorder = recording(http);
    const discovery = new Discovery(recorder.client);
    const stale = await eventually(
      'the dead API service marked Stale',
      async () => {
        const [resolution] = await resolveAll(discovery, [
          { group, version: 'v1', resource: 'gadgets' },
        ]);
        return resolution?.state === 'failed' ? resolution : undefined;
      },
      WAIT,
    );
    expect(stale.reason).toContain(`${group}/v1 is stale in aggregated discovery`);
    // Resolved from the aggregated document: the dead group version was never read on its own.
    expect(recorder.perGroupVersion).toEqual([]);
  });

  it('without aggregated discovery (a plain answer, or a proxy refusing its media type) each group version is read, with the same answers', async () => {
    const http = testClient();
    const refs = [
      PODS,
      DEPLOYMENTS,
      NAMESPACES,
      { group: '', version: 'v1', resource: 'gadgets' },
      { group: 'nothing.kubexa.test', version: 'v1', resource: 'gadgets' },
    ];
    const aggregated = await resolveAll(new Discovery(http), refs);

    // A server that answers the plain lists: /api is an APIVersions, /apis an APIGroupList.
    const plain = recording(http, () => 'application/json');
    const fromPlain = await resolveAll(new Discovery(plain.client), refs);
    expect(plain.conditional).toEqual(['/api changed', '/apis changed']);
    expect(plain.perGroupVersion).toEqual([
      '/api/v1',
      '/apis/apps/v1',
      '/apis/nothing.kubexa.test/v1',
    ]);

    // A strict proxy that answers the aggregated media type with 406.
    const perGroupVersion: string[] = [];
    const strict: DiscoveryHttp = {
      getJson: (request, signal) => {
        perGroupVersion.push(request.path);
        return http.getJson(request, signal);
      },
      getJsonIfChanged: (request) =>
        Promise.reject(
          new KubeRequestError(406, `${request.path} answered HTTP 406: not acceptable`),
        ),
    };
    const fromStrict = await resolveAll(new Discovery(strict), refs);
    expect(perGroupVersion).toEqual(['/api/v1', '/apis/apps/v1', '/apis/nothing.kubexa.test/v1']);

    expect(fromPlain).toEqual(aggregated);
    expect(fromStrict).toEqual(aggregated);
  });
});
