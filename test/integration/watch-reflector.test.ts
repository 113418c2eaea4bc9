// The watch layer's reflector (collector/watch/reflector.ts) over the real ListWatch
// (kube-list-watch.ts) against the real API server of the test harness. Its unit test drives a
// scripted fake; here the failures are the API server's own:
// - 403: a ServiceAccount token bound only to `get` on pods (no list, no watch). The reflector
//   must report the denial once (naming the verb), wait the longest backoff (never a tight loop),
//   keep quiet on further denials, and recover when the Role is widened. Time is a FakeClock:
//   the backoffs it asks for are read, not waited out.
// - 410: PodTemplates bypass the watch cache (kwokctl.yaml: watch-cache-sizes podtemplates#0)
//   and etcd is compacted every 10 s, so a watch started from a version older than the last
//   compaction is answered 410 Gone by etcd itself. The reflector must relist and end with
//   exactly the objects that exist, having missed none created while its watch was away.
import { CoreV1Api, KubeConfig, RbacAuthorizationV1Api, type V1Pod } from '@kubernetes/client-node';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import {
  kubePodListWatch,
  type PodListWatch,
} from '../../collector/sources/pod-logs/kube-pod-list-watch.js';
import { KubeHttp } from '../../collector/watch/kube-http.js';
import { kubeListWatch, type KubeObject } from '../../collector/watch/kube-list-watch.js';
import {
  errorCode,
  MAX_BACKOFF_MS,
  runReflector,
  type ReflectorHandlers,
} from '../../collector/watch/reflector.js';
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
  const handlers: ReflectorHandlers<V1Pod> = {
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
    forbidden(err, verb) {
      calls.push(`forbidden ${String(errorCode(err))} ${verb}`);
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
    async list(signal, options) {
      seen.lists++;
      try {
        const listed = await api.list(signal, options);
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
    const running = runReflector(api, recorded.handlers, {
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
      expect(recorded.calls).toEqual(['forbidden 403 list']);
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
      expect(recorded.calls).toEqual(['forbidden 403 list']);

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
      expect(recorded.calls).toEqual(['forbidden 403 list', 'replace 1']);
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

describe('watch layer against a real 410 Gone', () => {
  it('relists after etcd compacted past its version and misses nothing created meanwhile', async () => {
    const ns = await createTestNamespace(kc, 'reflector-gone');
    const http = new KubeHttp(kc);
    const template = (name: string) => ({
      metadata: { name },
      template: { spec: { containers: [{ name: 'app', image: 'registry.invalid/app:1' }] } },
    });
    try {
      for (const name of ['t0', 't1']) {
        await core.createNamespacedPodTemplate({ namespace: ns.name, body: template(name) });
      }
      const real = kubeListWatch(
        http,
        {
          group: '',
          version: 'v1',
          resource: 'podtemplates',
          namespaced: true,
          namespace: ns.name,
        },
        (object: KubeObject) => object,
      );
      // The first watch waits (as a watch does while the API server is away) until the version
      // the list returned has been compacted; every later watch goes straight through.
      let release: () => void = () => undefined;
      const away = new Promise<void>((resolve) => {
        release = resolve;
      });
      let listedVersion = '';
      const watchFailures: (number | undefined)[] = [];
      let lists = 0;
      let watches = 0;
      const api: typeof real = {
        async list(signal, options) {
          lists++;
          const page = await real.list(signal, options);
          listedVersion = page.resourceVersion;
          return page;
        },
        async watch(resourceVersion, onEvent, signal) {
          watches++;
          if (watches === 1) await away;
          try {
            await real.watch(resourceVersion, onEvent, signal);
          } catch (err: unknown) {
            watchFailures.push(errorCode(err));
            throw err;
          }
        },
      };
      const names = new Set<string>();
      const calls: string[] = [];
      const clock = new FakeClock();
      const stop = new AbortController();
      const running = runReflector(
        api,
        {
          replace(objects) {
            calls.push(`replace ${String(objects.length)}`);
            names.clear();
            for (const o of objects) names.add(o.metadata?.name ?? '');
          },
          upsert: (o) => names.add(o.metadata?.name ?? ''),
          remove: (o) => names.delete(o.metadata?.name ?? ''),
          forbidden: () => calls.push('forbidden'),
        },
        { clock, logger: pino({ level: 'silent' }), signal: stop.signal },
      );
      try {
        await eventually('the first list', () => Promise.resolve(listedVersion || undefined), {
          timeoutMs: 30_000,
        });
        const stale = listedVersion;
        // While the watch is away: changes, then the compaction (at most ~10 s, waited for by
        // asking etcd itself: a watch from the stale version answers 410 once it is compacted).
        for (const name of ['t2', 't3']) {
          await core.createNamespacedPodTemplate({ namespace: ns.name, body: template(name) });
        }
        await core.deleteNamespacedPodTemplate({ namespace: ns.name, name: 't0' });
        await eventually(
          'etcd to compact past the listed version',
          async () => {
            const probe = new AbortController();
            const timer = setTimeout(() => {
              probe.abort();
            }, 1500);
            try {
              await real.watch(stale, () => undefined, probe.signal);
              return undefined;
            } catch (err: unknown) {
              return errorCode(err) === 410 ? true : undefined;
            } finally {
              clearTimeout(timer);
            }
          },
          { timeoutMs: 90_000, intervalMs: 1000 },
        );
        release();
        await eventually(
          'the relist after 410',
          () => Promise.resolve(calls.length >= 2 || undefined),
          { timeoutMs: 30_000, intervalMs: 100 },
        );
        expect(watchFailures).toEqual([410]);
        expect(calls).toEqual(['replace 2', 'replace 3']);
        expect([...names].sort()).toEqual(['t1', 't2', 't3']);
        // 410 relists at once: no backoff.
        expect(clock.sleeps).toEqual([]);
        // And the watch after the relist carries on.
        await core.createNamespacedPodTemplate({ namespace: ns.name, body: template('t4') });
        await eventually('t4 from the watch', () => Promise.resolve(names.has('t4') || undefined), {
          timeoutMs: 30_000,
          intervalMs: 100,
        });
        expect(lists).toBe(2);
      } finally {
        release();
        stop.abort();
        await running;
      }
    } finally {
      http.close();
      await ns.delete();
    }
  }, 180_000);
});
