// The state source through a real relist after 410 Gone, end to end to the demo gateway.
// PodTemplates bypass the API server's watch cache (kwokctl.yaml), so their watch is etcd's own,
// and the harness compacts etcd every 10 s. A watch that stays connected is never affected by a
// compaction (it carries on from its own revision); a watch that has to start again from a version
// compacted meanwhile is answered 410 and must relist. So the collector reaches the API server
// through a TCP proxy (test/helpers/tcp-proxy.ts) that cuts its watch and keeps its next request
// waiting while the test changes objects and waits for etcd to compact past every version the
// collector could know. Released, the watch gets 410 (the watch_restarts metric counts it as
// `expired`), the collector relists, and the gateway receives exactly what changed while it was
// away: ADDED for the new object, MODIFIED with the last version of the changed one (a relist sees
// only the last version: the version in between is the one thing a relist cannot send), DELETED
// for the deleted one, DELETED + ADDED for the one deleted and created again under the same name,
// nothing for the unchanged one. Then the watch carries on.
import { CoreV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { KubeHttp } from '../../collector/watch/kube-http.js';
import { kubeListWatch, type KubeObject } from '../../collector/watch/kube-list-watch.js';
import { errorCode } from '../../collector/watch/reflector.js';
import {
  createTestNamespace,
  eventually,
  loadKubeConfig,
  type TestNamespace,
} from '../helpers/kube.js';
import { startTcpProxy } from '../helpers/tcp-proxy.js';
import { startStateCollector } from './state-collector.js';

const kubeconfigPath = inject('kubeconfigPath');
const kc = loadKubeConfig(kubeconfigPath);
const core = kc.makeApiClient(CoreV1Api);
const WAIT = { timeoutMs: 30_000, intervalMs: 100 };

let ns: TestNamespace;
beforeAll(async () => {
  ns = await createTestNamespace(kc, 'state-compact');
});
afterAll(async () => {
  await ns.delete();
});

const template = (name: string, generation: string) => ({
  metadata: { name, labels: { generation } },
  template: { spec: { containers: [{ name: 'app', image: 'registry.invalid/app:1' }] } },
});

describe('state source through a real 410 Gone', () => {
  it('relists after etcd compacted past its version: nothing lost, only what changed re-sent', async () => {
    const proxy = await startTcpProxy(kc);
    const http = new KubeHttp(kc);
    try {
      await using running = await startStateCollector(
        kubeconfigPath,
        [
          'collect:',
          '  logs: { enabled: false }',
          '  events: { enabled: false }',
          '  state:',
          '    resync_period: "0"',
          '    rules:',
          `      - namespace: ${ns.name}`,
          '        resources: [v1/podtemplates]',
        ],
        { kube: proxy.kubeConfig },
      );
      const health = running.collector.health.ports();
      await eventually(
        'the state watch synced',
        async () => {
          const reply = await fetch(`http://127.0.0.1:${String(health.health)}/readyz?verbose`);
          const body = (await reply.json()) as {
            components?: Record<string, { status: string }>;
          };
          return body.components?.['source:state']?.status === 'ok' ? true : undefined;
        },
        WAIT,
      );
      const received = (): string[] =>
        running.states
          .filter((s) => s.resource === 'podtemplates')
          .map((s) => {
            const metadata = s.object['metadata'] as { resourceVersion?: string; uid?: string };
            return s.type === 'DELETED'
              ? `DELETED ${s.name} ${metadata.uid ?? ''}`
              : `${s.type} ${s.name} ${metadata.resourceVersion ?? ''} ${metadata.uid ?? ''}`;
          });
      const expected: string[] = [];
      const line = (
        type: string,
        object: { metadata?: { name?: string; uid?: string; resourceVersion?: string } },
      ) =>
        type === 'DELETED'
          ? `DELETED ${object.metadata?.name ?? ''} ${object.metadata?.uid ?? ''}`
          : `${type} ${object.metadata?.name ?? ''} ${object.metadata?.resourceVersion ?? ''} ${object.metadata?.uid ?? ''}`;
      const create = (name: string) =>
        core.createNamespacedPodTemplate({ namespace: ns.name, body: template(name, '1') });
      const relabel = async (name: string, generation: string) => {
        const current = await core.readNamespacedPodTemplate({ name, namespace: ns.name });
        return core.replaceNamespacedPodTemplate({
          name,
          namespace: ns.name,
          body: Object.assign(current, {
            metadata: Object.assign(current.metadata ?? {}, { labels: { generation } }),
          }),
        });
      };
      const remove = (name: string) =>
        core.deleteNamespacedPodTemplate({ name, namespace: ns.name, gracePeriodSeconds: 0 });

      // Before the cut: through the watch, one event per change.
      const objects = new Map<string, Awaited<ReturnType<typeof create>>>();
      for (const name of ['kept', 'changed', 'deleted', 'recreated']) {
        const created = await create(name);
        objects.set(name, created);
        expected.push(line('ADDED', created));
      }
      const changedOnce = await relabel('changed', '2');
      expected.push(line('MODIFIED', changedOnce));
      await eventually(
        'every change before the cut',
        () => Promise.resolve(received().length >= expected.length || undefined),
        WAIT,
      );
      expect(received()).toEqual(expected);

      // The cut: the watch ends, its next request waits at the proxy.
      proxy.hold();
      proxy.cut();
      await relabel('changed', '3');
      const changedLast = await relabel('changed', '4');
      await remove('deleted');
      await remove('recreated');
      const recreated = await create('recreated');
      const added = await create('added');
      // Every version the collector can know is at most the one the API server has now.
      const now = await core.listNamespacedPodTemplate({ namespace: ns.name });
      const cutVersion = now.metadata?.resourceVersion ?? '';
      const probe = kubeListWatch(
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
      await eventually(
        'etcd to compact past the version of the cut',
        async () => {
          const stop = new AbortController();
          const timer = setTimeout(() => {
            stop.abort();
          }, 1500);
          try {
            await probe.watch(cutVersion, () => undefined, stop.signal);
            return undefined;
          } catch (err: unknown) {
            return errorCode(err) === 410 ? true : undefined;
          } finally {
            clearTimeout(timer);
          }
        },
        { timeoutMs: 90_000, intervalMs: 1000 },
      );
      proxy.release();

      // The relist: only what changed while the watch was away, each once.
      const relist = [
        line('MODIFIED', changedLast),
        line('DELETED', objects.get('deleted') ?? {}),
        line('DELETED', objects.get('recreated') ?? {}),
        line('ADDED', recreated),
        line('ADDED', added),
      ];
      await eventually(
        'the relist at the gateway',
        () => Promise.resolve(received().length >= expected.length + relist.length || undefined),
        { timeoutMs: 60_000, intervalMs: 200 },
      );
      const metrics = await (
        await fetch(`http://127.0.0.1:${String(health.metrics)}/metrics`)
      ).text();
      const expired =
        /kubexa_collector_watch_restarts_total\{[^}]*resource="[^"]*podtemplates[^"]*"[^}]*cause="expired"[^}]*\} (\d+)/.exec(
          metrics,
        );
      expect(Number(expired?.[1] ?? 0), metrics).toBeGreaterThanOrEqual(1);
      // The relist's order is the list's (by name) for what it found, after the deletions it
      // synthesized; per object it is exact.
      expect(received().slice(0, expected.length)).toEqual(expected);
      expect(received().slice(expected.length).sort()).toEqual([...relist].sort());
      const recreatedAt = received().indexOf(line('ADDED', recreated));
      expect(recreatedAt).toBeGreaterThan(
        received().indexOf(line('DELETED', objects.get('recreated') ?? {})),
      );

      // And the watch after the relist carries on.
      const after = await relabel('kept', '5');
      await eventually(
        'a change after the relist',
        () => Promise.resolve(received().includes(line('MODIFIED', after)) || undefined),
        WAIT,
      );
      expect(received()).toHaveLength(expected.length + relist.length + 1);
    } finally {
      proxy.release();
      await proxy.close();
      http.close();
    }
  }, 240_000);
});
