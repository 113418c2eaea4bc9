// The state source across a kube-apiserver restart mid-watch (test/cluster/restart.ts stops the
// harness's API server and starts it again; etcd keeps every object and resourceVersion).
// Changes made just before the restart and right after it all arrive at the demo gateway: every
// resourceVersion the API server returned is there, none twice; each object ADDED once, the
// deleted ones DELETED once; the watch recovers (well) within 30 s of the API server answering.
import { ApiextensionsV1Api, CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { restartApiServer } from '../cluster/restart.js';
import {
  createTestNamespace,
  eventually,
  loadKubeConfig,
  type TestNamespace,
} from '../helpers/kube.js';
import { crdManifest } from '../helpers/test-apis.js';
import { startStateCollector, type SeenState } from './state-collector.js';

const kubeconfigPath = inject('kubeconfigPath');
const kc = loadKubeConfig(kubeconfigPath);
const core = kc.makeApiClient(CoreV1Api);
const crds = kc.makeApiClient(ApiextensionsV1Api);
const custom = kc.makeApiClient(CustomObjectsApi);
/** A CRD of this file's own: its resource is briefly not served after the API server restarts. */
const GROUP = `r${String(Date.now() % 1_000_000)}.kubexa.test`;
/** Recovery bound: a generous one, not a speed claim (the reflector backs off up to 30 s). */
const RECOVERY_MS = 30_000;

let ns: TestNamespace;
beforeAll(async () => {
  ns = await createTestNamespace(kc, 'state-restart');
  await crds.createCustomResourceDefinition({
    body: crdManifest({ group: GROUP, plural: 'gizmos', kind: 'Gizmo', scope: 'Namespaced' }),
  });
  await eventually(
    'the gizmos CRD served',
    async () => {
      const served: boolean = await custom
        .listNamespacedCustomObject({
          group: GROUP,
          version: 'v1',
          namespace: 'default',
          plural: 'gizmos',
        })
        .then(
          () => true,
          () => false,
        );
      return served || undefined;
    },
    { timeoutMs: 30_000 },
  );
});
afterAll(async () => {
  await crds.deleteCustomResourceDefinition({ name: `gizmos.${GROUP}` });
  await ns.delete();
});

const rvOf = (state: SeenState): string =>
  String((state.object['metadata'] as { resourceVersion?: string } | undefined)?.resourceVersion);

describe('state source across an API server restart', () => {
  it('loses nothing, repeats nothing, and recovers', async () => {
    await using running = await startStateCollector(kubeconfigPath, [
      'collect:',
      '  logs: { enabled: false }',
      '  events: { enabled: false }',
      '  state:',
      '    resync_period: "0"',
      '    rules:',
      `      - namespace: ${ns.name}`,
      `        resources: [configmaps, ${GROUP}/v1/gizmos]`,
    ]);
    const ports = running.collector.health.ports();
    await eventually(
      'the state watch synced',
      async () => {
        const reply = await fetch(`http://127.0.0.1:${String(ports.health)}/readyz?verbose=true`);
        const body = (await reply.json()) as { components?: Record<string, { status: string }> };
        return body.components?.['source:state']?.status === 'ok' ? true : undefined;
      },
      { timeoutMs: 30_000 },
    );
    const ours = (): SeenState[] =>
      running.states.filter((s) => s.namespace === ns.name && s.name.startsWith('c'));
    const expected: string[] = [];
    const create = async (i: number) => {
      const made = await core.createNamespacedConfigMap({
        namespace: ns.name,
        body: { metadata: { name: `c${String(i)}` }, data: { v: '0' } },
      });
      expected.push(made.metadata?.resourceVersion ?? '');
    };
    const update = async (i: number, v: string) => {
      const made = await core.patchNamespacedConfigMap({
        name: `c${String(i)}`,
        namespace: ns.name,
        body: [{ op: 'replace', path: '/data/v', value: v }],
      });
      expected.push(made.metadata?.resourceVersion ?? '');
    };

    // A CRD's object: right after the restart its resource is not served until the API server's
    // CRD informer has synced; the watch must ride that out, not stop and send it again.
    const gizmo = (spec: object) => ({
      apiVersion: `${GROUP}/v1`,
      kind: 'Gizmo',
      metadata: { name: 'g1' },
      spec,
    });
    await custom.createNamespacedCustomObject({
      group: GROUP,
      version: 'v1',
      namespace: ns.name,
      plural: 'gizmos',
      body: gizmo({ size: 1 }),
    });
    await eventually(
      'the gizmo at the gateway',
      () => Promise.resolve(running.states.some((s) => s.name === 'g1') || undefined),
      { timeoutMs: 30_000 },
    );

    // Before: ten objects, five changed; the restart follows at once, some of it in flight.
    for (let i = 0; i < 10; i++) await create(i);
    for (let i = 0; i < 5; i++) await update(i, '1');
    const restart = await restartApiServer(kubeconfigPath);
    // After: more objects, changes and deletions the watch has to catch up on.
    for (let i = 10; i < 15; i++) await create(i);
    for (let i = 5; i < 10; i++) await update(i, '2');
    const deleted = ['c0', 'c1', 'c2'];
    for (const name of deleted) await core.deleteNamespacedConfigMap({ name, namespace: ns.name });
    await eventually(
      'the gizmo changed after the restart',
      async () => {
        const current = (await custom.getNamespacedCustomObject({
          group: GROUP,
          version: 'v1',
          namespace: ns.name,
          plural: 'gizmos',
          name: 'g1',
        })) as { metadata: object };
        await custom.replaceNamespacedCustomObject({
          group: GROUP,
          version: 'v1',
          namespace: ns.name,
          plural: 'gizmos',
          name: 'g1',
          body: { ...gizmo({ size: 2 }), metadata: current.metadata },
        });
        return true;
      },
      { timeoutMs: RECOVERY_MS },
    );

    await eventually(
      'every change after the restart',
      () => {
        const seen = new Set(ours().map(rvOf));
        const deletions = ours().filter((s) => s.type === 'DELETED').length;
        return Promise.resolve(
          expected.every((rv) => seen.has(rv)) && deletions >= deleted.length ? true : undefined,
        );
      },
      { timeoutMs: RECOVERY_MS, intervalMs: 100 },
    );
    await eventually(
      'the gizmo change after the restart at the gateway',
      () =>
        Promise.resolve(
          running.states.some(
            (s) =>
              s.name === 'g1' &&
              s.type === 'MODIFIED' &&
              JSON.stringify(s.object['spec']) === JSON.stringify({ size: 2 }),
          ) || undefined,
        ),
      { timeoutMs: RECOVERY_MS, intervalMs: 100 },
    );
    // A moment more for anything repeated to show up.
    await new Promise((resolve) => setTimeout(resolve, 2000));
    // The CRD's watch rode out the restart: never stopped, its object never sent again.
    const gizmoEvents = running.states.filter((s) => s.name === 'g1').map((s) => s.type);
    expect(gizmoEvents).toEqual(['ADDED', 'MODIFIED']);
    expect(running.logs.raw.filter((l) => l.includes('"why":"resource removed"'))).toEqual([]);
    const changes = ours().filter((s) => s.type !== 'DELETED');
    const rvs = changes.map(rvOf);
    expect(new Set(rvs).size, `a resourceVersion twice: ${rvs.join(' ')}`).toBe(rvs.length);
    expect(rvs.slice().sort()).toEqual(expected.slice().sort());
    for (let i = 0; i < 15; i++) {
      const name = `c${String(i)}`;
      expect(changes.filter((s) => s.name === name && s.type === 'ADDED').length, name).toBe(1);
    }
    const deletions = ours()
      .filter((s) => s.type === 'DELETED')
      .map((s) => s.name)
      .sort();
    expect(deletions).toEqual(deleted);
    // The watch did break: the restart was seen, not slept through.
    const metrics = await (await fetch(`http://127.0.0.1:${String(ports.metrics)}/metrics`)).text();
    const restarts = metrics
      .split('\n')
      .filter(
        (l) => l.startsWith('kubexa_collector_watch_restarts_total') && l.includes('configmaps'),
      )
      .reduce((sum, l) => sum + Number(l.split(' ').at(-1)), 0);
    expect(
      restarts,
      metrics
        .split('\n')
        .filter((l) => l.includes('watch_restarts'))
        .join('\n'),
    ).toBeGreaterThan(0);
    expect(restart.newPid).not.toBe(restart.oldPid);
  });
});
