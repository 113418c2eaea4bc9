// The state source's periodic resync against the real API server, end to end to the demo
// gateway: a resync re-sends every cached object as MODIFIED with the resourceVersion it already
// had (nothing changed on the server). A rule's resync_period applies to its watch; a rule without
// one takes the global collect.state.resync_period; "0" turns it off, per rule or globally. Each
// collector below runs until the resyncing watch has resynced three times, while the other watch,
// whose resync is off, must have sent nothing after its ADDED.
import { CoreV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import {
  createTestNamespace,
  eventually,
  loadKubeConfig,
  type TestNamespace,
} from '../helpers/kube.js';
import { startStateCollector, type RunningStateCollector } from './state-collector.js';

const kubeconfigPath = inject('kubeconfigPath');
const kc = loadKubeConfig(kubeconfigPath);
const core = kc.makeApiClient(CoreV1Api);
const WAIT = { timeoutMs: 30_000, intervalMs: 100 };

let ns: TestNamespace;
beforeAll(async () => {
  ns = await createTestNamespace(kc, 'state-resync');
  await core.createNamespacedConfigMap({
    namespace: ns.name,
    body: { metadata: { name: 'probe' }, data: { a: '1' } },
  });
  await core.createNamespacedServiceAccount({
    namespace: ns.name,
    body: { metadata: { name: 'probe' } },
  });
});
afterAll(async () => {
  await ns.delete();
});

/** The probe object's events of one resource: type and resourceVersion. */
function probeEvents(running: RunningStateCollector, resource: string): string[] {
  return running.states
    .filter((s) => s.resource === resource && s.name === 'probe')
    .map((s) => {
      const metadata = s.object['metadata'] as { resourceVersion?: string };
      return `${s.type} ${metadata.resourceVersion ?? ''}`;
    });
}

/** Runs until `resyncing`'s probe was re-sent three times; returns both resources' events. */
async function threeResyncs(
  ruleLines: readonly string[],
  resyncing: string,
  quiet: string,
): Promise<{ resyncing: string[]; quiet: string[] }> {
  await using running = await startStateCollector(kubeconfigPath, [
    'collect:',
    '  logs: { enabled: false }',
    '  events: { enabled: false }',
    ...ruleLines,
  ]);
  await eventually(
    `three resyncs of ${resyncing}`,
    () => Promise.resolve(probeEvents(running, resyncing).length >= 4 || undefined),
    WAIT,
  );
  await eventually(
    `the ${quiet} probe listed`,
    () => Promise.resolve(probeEvents(running, quiet).length >= 1 || undefined),
    WAIT,
  );
  return { resyncing: probeEvents(running, resyncing), quiet: probeEvents(running, quiet) };
}

describe('state resync against the real API server', () => {
  it('a rule resync_period resyncs its watch while the global "0" keeps the other off', async () => {
    const seen = await threeResyncs(
      [
        '  state:',
        '    resync_period: "0"',
        '    rules:',
        `      - namespace: ${ns.name}`,
        '        resources: [configmaps]',
        '        resync_period: 1s',
        `      - namespace: ${ns.name}`,
        '        resources: [serviceaccounts]',
      ],
      'configmaps',
      'serviceaccounts',
    );
    const version = seen.resyncing[0]?.split(' ')[1] ?? '';
    expect(seen.resyncing.slice(0, 4)).toEqual([
      `ADDED ${version}`,
      `MODIFIED ${version}`,
      `MODIFIED ${version}`,
      `MODIFIED ${version}`,
    ]);
    expect(seen.quiet).toHaveLength(1);
    expect(seen.quiet[0]).toMatch(/^ADDED /);
  }, 90_000);

  it('the global resync_period applies to a rule without one, and a rule "0" turns it off', async () => {
    const seen = await threeResyncs(
      [
        '  state:',
        '    resync_period: 1s',
        '    rules:',
        `      - namespace: ${ns.name}`,
        '        resources: [serviceaccounts]',
        `      - namespace: ${ns.name}`,
        '        resources: [configmaps]',
        '        resync_period: "0"',
      ],
      'serviceaccounts',
      'configmaps',
    );
    const version = seen.resyncing[0]?.split(' ')[1] ?? '';
    expect(seen.resyncing.slice(0, 4)).toEqual([
      `ADDED ${version}`,
      `MODIFIED ${version}`,
      `MODIFIED ${version}`,
      `MODIFIED ${version}`,
    ]);
    expect(seen.quiet).toHaveLength(1);
    expect(seen.quiet[0]).toMatch(/^ADDED /);
  }, 90_000);
});
