// The gateway opt-in for new payload kinds (HandshakeResponse.accepted_payloads) and what it
// means for readiness, end to end: the collector as collector.ts wires it, the real API server,
// the demo gateway. A gateway that accepted nothing gets no lifecycle or Kubernetes events, and
// the events source does not hold readiness for it (it watches from start all the same, so that
// an opt-in does not wait for a first list); a gateway that opts in later gets the Events listed
// before; a gateway that accepted them gets them, and readiness waits for the watches' first
// sync.
import { CoreV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import {
  createTestNamespace,
  eventually,
  loadKubeConfig,
  type TestNamespace,
} from '../helpers/kube.js';
import { OPT_IN_EVENTS } from '../../collector/sources/events/opt-in.js';
import { startStateCollector, type RunningStateCollector } from './state-collector.js';

const kubeconfigPath = inject('kubeconfigPath');
const kc = loadKubeConfig(kubeconfigPath);
const core = kc.makeApiClient(CoreV1Api);
const WAIT = { timeoutMs: 30_000, intervalMs: 100 };
const NO_NODE = 'no-such-node-kubexa';
const EVENTS_ONLY = [
  'collect:',
  '  logs: { enabled: false }',
  '  state: { enabled: false }',
  '  events: { enabled: true }',
];

let ns: TestNamespace;
beforeAll(async () => {
  ns = await createTestNamespace(kc, 'opt-in');
  // Pods are admitted only once the namespace's default ServiceAccount exists.
  await eventually(
    'the default ServiceAccount',
    () => core.readNamespacedServiceAccount({ name: 'default', namespace: ns.name }),
    WAIT,
  );
});
afterAll(async () => {
  await ns.delete();
});

interface Component {
  readonly status: string;
  readonly reason: string | null;
}

async function readiness(running: RunningStateCollector): Promise<Record<string, Component>> {
  const port = running.collector.health.ports().health;
  const response = await fetch(`http://127.0.0.1:${String(port)}/readyz?verbose`);
  const body = (await response.json()) as { components: Record<string, Component> };
  return body.components;
}

/** A pod bound to a node nobody manages, then a Kubernetes Event about it. */
async function podWithEvent(name: string): Promise<void> {
  await core.createNamespacedPod({
    namespace: ns.name,
    body: {
      metadata: { name },
      spec: { nodeName: NO_NODE, containers: [{ name: 'app', image: 'registry.invalid/a:1' }] },
    },
  });
  const now = new Date();
  await core.createNamespacedEvent({
    namespace: ns.name,
    body: {
      metadata: { name: `${name}.event` },
      involvedObject: { kind: 'Pod', name, namespace: ns.name, apiVersion: 'v1' },
      reason: 'Testing',
      message: 'an event about the pod',
      type: 'Normal',
      count: 1,
      firstTimestamp: now,
      lastTimestamp: now,
      source: { component: 'opt-in-test' },
    },
  });
}

const kinds = (running: RunningStateCollector, pod: string): string[] =>
  running.messages.flatMap((m) => {
    const p = m.payload;
    if (p?.$case === 'podLifecycle' && p.value.pod === pod) return ['podLifecycle'];
    if (p?.$case === 'kubeEvent' && p.value.regarding?.name === pod) return ['kubeEvent'];
    return [];
  });

describe('gateway opt-in for events (accepted_payloads)', () => {
  it('a gateway that accepted nothing: watched, no events sent, and readiness is not held', async () => {
    await using running = await startStateCollector(kubeconfigPath, EVENTS_ONLY, {
      heartbeatIntervalSec: 1,
    });
    await running.session();
    const events = await eventually(
      'ready',
      async () => {
        const components = await readiness(running);
        return components['gateway']?.status === 'ok' ? components['source:events'] : undefined;
      },
      WAIT,
    );
    expect(events.status).toBe('ok');
    expect(events.reason).toMatch(/^the gateway has not opted in: not sending/);
    await podWithEvent('ignored');
    // The stream carries data (heartbeats; with state off there is no catalog to wait for).
    await running.gateway.waitForStored('heartbeat', 2);
    await new Promise((resolve) => setTimeout(resolve, 2000));
    expect(kinds(running, 'ignored')).toEqual([]);
    expect(running.logs.raw.some((l) => l.includes('kubernetes events watch started'))).toBe(true);
  });

  it('a gateway that opts in after the first sync gets the Events listed before it', async () => {
    await podWithEvent('before');
    await using running = await startStateCollector(kubeconfigPath, EVENTS_ONLY);
    const session = await running.session();
    // Listed (both watches synced), not sent.
    await eventually(
      'the watches synced, unsent',
      async () =>
        (await readiness(running))['source:events']?.reason ===
          'the gateway has not opted in: not sending' || undefined,
      WAIT,
    );
    expect(kinds(running, 'before')).toEqual([]);
    running.gateway.sendConfigUpdate(session, {
      configVersion: 'opt-in',
      config: {
        logCollectors: [],
        watchers: [{ id: OPT_IN_EVENTS, namespace: '', kinds: [], resyncSec: 0, resources: [] }],
        metricScrapers: [],
        heartbeatIntervalSec: 0,
        batchSize: 0,
        flushIntervalMs: 0,
      },
    });
    await eventually(
      'the Event listed before the opt-in',
      () => Promise.resolve(kinds(running, 'before').includes('kubeEvent') || undefined),
      WAIT,
    );
  });

  it('a gateway that accepted both kinds gets them once readiness says the watches synced', async () => {
    await using running = await startStateCollector(kubeconfigPath, EVENTS_ONLY, {
      acceptedPayloads: ['pod_lifecycle', 'kube_event'],
    });
    await running.session();
    await eventually(
      'the events source synced',
      async () => (await readiness(running))['source:events']?.status === 'ok' || undefined,
      WAIT,
    );
    await podWithEvent('wanted');
    await eventually(
      'a lifecycle event and a Kubernetes event',
      () => {
        const seen = kinds(running, 'wanted');
        return Promise.resolve(
          seen.includes('podLifecycle') && seen.includes('kubeEvent') ? seen : undefined,
        );
      },
      WAIT,
    );
  });
});
