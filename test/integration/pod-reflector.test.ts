// The pod reflector (collector/sources/pod-logs/pod-reflector.ts, as it is) over the real
// PodListWatch (kube-pod-list-watch.ts) against the real API server of the test harness. Its
// unit test drives a scripted fake; here the 403 is the API server's own: a ServiceAccount token
// bound only to `get` on pods (no list, no watch). The reflector must report the denial once,
// wait the longest backoff (never a tight loop), keep quiet on further denials, and recover when
// the Role is widened. Time is a FakeClock: the backoffs it asks for are read, not waited out.
//
// The 410 half is not here yet: the harness compacts etcd every 10 s, but pods are served from
// the API server's watch cache, which answers an old resourceVersion with 410 only once it is
// full and its oldest event is older than 75 s (a manual probe needed about 2 minutes and 600
// pod events; a test churning pods for 400 s on a loaded machine did not get there).
import { CoreV1Api, KubeConfig, RbacAuthorizationV1Api, type V1Pod } from '@kubernetes/client-node';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { kubePodListWatch } from '../../collector/sources/pod-logs/kube-pod-list-watch.js';
import {
  errorCode,
  MAX_BACKOFF_MS,
  runPodReflector,
  type PodListWatch,
  type PodReflectorHandlers,
} from '../../collector/sources/pod-logs/pod-reflector.js';
import { FakeClock } from '../helpers/fake-clock.js';
import {
  createTestNamespace,
  eventually,
  loadKubeConfig,
  type TestNamespace,
} from '../helpers/kube.js';

const kc = loadKubeConfig(inject('kubeconfigPath'));
const core = kc.makeApiClient(CoreV1Api);
let narrowNs: TestNamespace;

beforeAll(async () => {
  narrowNs = await createTestNamespace(kc, 'reflector-narrow');
});

afterAll(async () => {
  await narrowNs.delete();
});

const podBody = (name: string): V1Pod => ({
  metadata: { name },
  spec: { containers: [{ name: 'app', image: 'registry.invalid/app:1' }] },
});

/** What the reflector told its handlers, in order. */
function recordingHandlers() {
  const names = new Set<string>();
  const calls: string[] = [];
  const forbidden: unknown[] = [];
  const handlers: PodReflectorHandlers = {
    replace(pods) {
      calls.push(`replace ${String(pods.length)}`);
      names.clear();
      for (const pod of pods) names.add(pod.metadata?.name ?? '');
    },
    upsert(pod) {
      names.add(pod.metadata?.name ?? '');
    },
    remove(pod) {
      names.delete(pod.metadata?.name ?? '');
    },
    forbidden(err) {
      calls.push(`forbidden ${String(errorCode(err))}`);
      forbidden.push(err);
    },
  };
  return { handlers, names, calls, forbidden };
}

/** The real PodListWatch, counting lists and recording the status code of every failed watch. */
function observed(api: PodListWatch) {
  const seen = {
    lists: 0,
    listFailures: [] as (number | undefined)[],
    watchFailures: [] as (number | undefined)[],
  };
  const wrapped: PodListWatch = {
    async list(signal) {
      seen.lists++;
      try {
        const listed = await api.list(signal);
        return listed;
      } catch (err: unknown) {
        seen.listFailures.push(errorCode(err));
        throw err;
      }
    },
    async watch(resourceVersion, onEvent, signal) {
      try {
        await api.watch(resourceVersion, onEvent, signal);
      } catch (err: unknown) {
        seen.watchFailures.push(errorCode(err));
        throw err;
      }
    },
  };
  return { api: wrapped, seen };
}

describe('pod reflector against the real API server', () => {
  it('with a token that may only get pods: reports 403 once, waits the longest backoff, recovers when granted', async () => {
    const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
    const namespace = narrowNs.name;
    await core.createNamespacedServiceAccount({
      namespace,
      body: { metadata: { name: 'getter' } },
    });
    const role = (verbs: string[]) => ({
      metadata: { name: 'pod-getter' },
      rules: [{ apiGroups: [''], resources: ['pods'], verbs }],
    });
    await rbac.createNamespacedRole({ namespace, body: role(['get']) });
    await rbac.createNamespacedRoleBinding({
      namespace,
      body: {
        metadata: { name: 'getter-pod-getter' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'pod-getter' },
        subjects: [{ kind: 'ServiceAccount', name: 'getter', namespace }],
      },
    });
    const token = await core.createNamespacedServiceAccountToken({
      name: 'getter',
      namespace,
      body: { spec: { audiences: [], expirationSeconds: 600 } },
    });
    const narrow = new KubeConfig();
    const cluster = kc.getCurrentCluster();
    if (cluster === null || token.status === undefined) throw new Error('no cluster or token');
    narrow.loadFromOptions({
      clusters: [cluster],
      users: [{ name: 'getter', token: token.status.token }],
      contexts: [{ name: 'getter', cluster: cluster.name, user: 'getter' }],
      currentContext: 'getter',
    });
    await core.createNamespacedPod({ namespace, body: podBody('visible') });
    // The token authenticates and may get the pod: a denial below is about list, not identity.
    const narrowCore = narrow.makeApiClient(CoreV1Api);
    expect(
      (await narrowCore.readNamespacedPod({ namespace, name: 'visible' })).metadata?.name,
    ).toBe('visible');

    const clock = new FakeClock();
    const recorded = recordingHandlers();
    const { api, seen } = observed(kubePodListWatch(narrow, namespace));
    const stop = new AbortController();
    const running = runPodReflector(api, recorded.handlers, {
      clock,
      logger: pino({ level: 'silent' }),
      signal: stop.signal,
      random: () => 0,
    });
    try {
      // The first denial: reported, then the longest backoff (jitter 0 => 0.8 x the maximum).
      const first = await clock.waitForSleep(() => true);
      expect(first).toBe(MAX_BACKOFF_MS * 0.8);
      expect(seen.listFailures).toEqual([403]);
      expect(recorded.calls).toEqual(['forbidden 403']);
      // Still denied after the backoff: no second report, the same longest backoff, one list each.
      clock.advance(first);
      await eventually(
        'the second list',
        () => Promise.resolve(seen.listFailures.length >= 2 || undefined),
        {
          timeoutMs: 30_000,
          intervalMs: 50,
        },
      );
      const second = await clock.waitForSleep(() => true);
      expect(second).toBe(MAX_BACKOFF_MS * 0.8);
      expect(seen.listFailures).toEqual([403, 403]);
      expect(seen.lists).toBe(2);
      expect(recorded.calls).toEqual(['forbidden 403']);

      // Widened: the next list succeeds and the reflector is up with the pods.
      await rbac.replaceNamespacedRole({
        name: 'pod-getter',
        namespace,
        body: role(['get', 'list', 'watch']),
      });
      await eventually(
        'the narrow token may list pods',
        async () =>
          (await narrowCore.listNamespacedPod({ namespace })).items.length > 0 ? true : undefined,
        { timeoutMs: 30_000, intervalMs: 200 },
      );
      clock.advance(second);
      await eventually(
        'the list after the grant',
        () => Promise.resolve(recorded.names.has('visible') || undefined),
        {
          timeoutMs: 30_000,
          intervalMs: 50,
        },
      );
      expect(recorded.calls).toEqual(['forbidden 403', 'replace 1']);
      await core.createNamespacedPod({ namespace, body: podBody('watched') });
      await eventually(
        'a pod from the watch',
        () => Promise.resolve(recorded.names.has('watched') || undefined),
        {
          timeoutMs: 30_000,
          intervalMs: 50,
        },
      );
    } finally {
      stop.abort();
      await running;
    }
  }, 120_000);
});
