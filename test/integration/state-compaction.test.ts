// The state source across etcd compactions (the harness compacts every 10 s): PodTemplates bypass
// the API server's watch cache (kwokctl.yaml), so their watch is etcd's own. Changes made over
// three compaction intervals arrive at the demo gateway each exactly once, in order per object,
// none lost: every resourceVersion the API server returned is there, and no resourceVersion twice.
import { setTimeout as sleep } from 'node:timers/promises';
import { CoreV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import {
  createTestNamespace,
  eventually,
  loadKubeConfig,
  type TestNamespace,
} from '../helpers/kube.js';
import { startStateCollector } from './state-collector.js';

const kubeconfigPath = inject('kubeconfigPath');
const kc = loadKubeConfig(kubeconfigPath);
const core = kc.makeApiClient(CoreV1Api);

let ns: TestNamespace;
beforeAll(async () => {
  ns = await createTestNamespace(kc, 'state-compact');
});
afterAll(async () => {
  await ns.delete();
});

describe('state source across etcd compactions', () => {
  it('delivers every change once, none lost, none repeated', async () => {
    await using running = await startStateCollector(kubeconfigPath, [
      'collect:',
      '  logs: { enabled: false }',
      '  events: { enabled: false }',
      '  state:',
      '    rules:',
      `      - namespace: ${ns.name}`,
      '        resources: [v1/podtemplates]',
    ]);
    // Synced before the first change, so every change comes from the watch, not the list.
    const port = running.collector.health.ports().health;
    await eventually(
      'the state watch synced',
      async () => {
        const reply = await fetch(`http://127.0.0.1:${String(port)}/readyz?verbose=true`);
        const body = (await reply.json()) as { components?: Record<string, { status: string }> };
        return body.components?.['source:state']?.status === 'ok' ? true : undefined;
      },
      { timeoutMs: 30_000 },
    );
    const expected: string[] = [];
    const template = (name: string, generation: number) => ({
      metadata: { name, labels: { generation: String(generation) } },
      template: { spec: { containers: [{ name: 'app', image: 'registry.invalid/app:1' }] } },
    });
    // About 30 s of changes: three compactions pass while the watch runs.
    const started = Date.now();
    let round = 0;
    while (Date.now() - started < 30_000) {
      const name = `t${String(round % 3)}`;
      if (round < 3) {
        const created = await core.createNamespacedPodTemplate({
          namespace: ns.name,
          body: template(name, round),
        });
        expected.push(`ADDED ${name} ${created.metadata?.resourceVersion ?? ''}`);
      } else {
        const current = await core.readNamespacedPodTemplate({ name, namespace: ns.name });
        const updated = await core.replaceNamespacedPodTemplate({
          name,
          namespace: ns.name,
          body: Object.assign(current, {
            metadata: Object.assign(current.metadata ?? {}, {
              labels: { generation: String(round) },
            }),
          }),
        });
        expected.push(`MODIFIED ${name} ${updated.metadata?.resourceVersion ?? ''}`);
      }
      round++;
      await sleep(700);
    }
    for (const name of ['t0', 't1', 't2']) {
      await core.deleteNamespacedPodTemplate({ name, namespace: ns.name });
      expected.push(`DELETED ${name}`);
    }
    const received = (): string[] =>
      running.states
        .filter((s) => s.resource === 'podtemplates')
        .map((s) => {
          const version = (s.object['metadata'] as { resourceVersion?: string }).resourceVersion;
          return s.type === 'DELETED'
            ? `DELETED ${s.name}`
            : `${s.type} ${s.name} ${version ?? ''}`;
        });
    await eventually(
      'every change at the gateway',
      () => Promise.resolve(received().length >= expected.length || undefined),
      { timeoutMs: 60_000, intervalMs: 200 },
    );
    const byObject = (lines: string[], name: string) =>
      lines.filter((l) => l.split(' ')[1] === name);
    for (const name of ['t0', 't1', 't2']) {
      expect(byObject(received(), name)).toEqual(byObject(expected, name));
    }
    expect(received()).toHaveLength(expected.length);
    expect(round).toBeGreaterThan(20);
  }, 180_000);
});
