// Kubernetes Events against the real API server, end to end to the demo gateway:
// - across a collector restart: the new collector's first list sends every Event again; the
//   gateway stores an Event once per series count (the message id is the Event's UID and count),
//   so an Event unchanged while the collector was down is not stored twice, and one whose series
//   grew meanwhile is stored with its new count;
// - where events.k8s.io/v1 is not served (a proxy in front of the API server refuses the
//   aggregated discovery document and answers events.k8s.io/v1's own discovery and every request
//   under it with the API server's own 404), the collector watches core/v1 Events instead, and
//   they flow.
import { CoreV1Api, RbacAuthorizationV1Api, type CoreV1Event } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { PAYLOAD_KUBE_EVENT } from '../../collector/sources/events/opt-in.js';
import type { AgentMessage, KubeEvent } from '../../proto/index.js';
import {
  createTestNamespace,
  eventually,
  loadKubeConfig,
  type TestNamespace,
} from '../helpers/kube.js';
import { startRecordingProxy } from '../helpers/recording-proxy.js';
import { startStateCollector, type RunningStateCollector } from './state-collector.js';

const kubeconfigPath = inject('kubeconfigPath');
const kc = loadKubeConfig(kubeconfigPath);
const core = kc.makeApiClient(CoreV1Api);
const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
const WAIT = { timeoutMs: 30_000, intervalMs: 100 };
const EVENTS_ONLY = [
  'collect:',
  '  logs: { enabled: false }',
  '  state: { enabled: false }',
  '  events: { enabled: true, pod_lifecycle: false }',
];

let ns: TestNamespace;
let gatewayToClose: { close(): Promise<void> } | undefined;
beforeAll(async () => {
  ns = await createTestNamespace(kc, 'events-restart');
});
afterAll(async () => {
  await gatewayToClose?.close();
  await ns.delete();
});

const kubeEvent = (message: AgentMessage): KubeEvent[] =>
  message.payload?.$case === 'kubeEvent' ? [message.payload.value] : [];

async function synced(running: RunningStateCollector): Promise<void> {
  const port = running.collector.health.ports().health;
  await eventually(
    'the Events watch synced',
    async () => {
      const reply = await fetch(`http://127.0.0.1:${String(port)}/readyz?verbose`);
      const body = (await reply.json()) as { components?: Record<string, { status: string }> };
      return body.components?.['source:events']?.status === 'ok' ? true : undefined;
    },
    WAIT,
  );
}

function warning(name: string, count: number): CoreV1Event {
  const at = new Date();
  return {
    metadata: { name },
    involvedObject: { kind: 'ConfigMap', name: 'settings', namespace: ns.name, apiVersion: 'v1' },
    reason: 'Flapping',
    message: `${name} happened`,
    type: 'Warning',
    count,
    firstTimestamp: at,
    lastTimestamp: at,
    source: { component: 'kubexa-test' },
  };
}

describe('Kubernetes Events against the real API server', () => {
  it('a collector restart sends every Event again; the gateway stores series counts, not repeats', async () => {
    const first = await startStateCollector(kubeconfigPath, EVENTS_ONLY, {
      acceptedPayloads: [PAYLOAD_KUBE_EVENT],
      keepGateway: true,
    });
    const { gateway } = first;
    // Every delivery, first or repeated, of this namespace's Events.
    const deliveries: { name: string; count: number; isNew: boolean }[] = [];
    gateway.events.on('message', (message: AgentMessage, isNew: boolean) => {
      for (const event of kubeEvent(message)) {
        if (event.namespace === ns.name) {
          deliveries.push({ name: event.name, count: event.count, isNew });
        }
      }
    });
    const stored = (name: string) =>
      deliveries.filter((d) => d.name === name && d.isNew).map((d) => d.count);
    // Closed after the test, pass or fail (the second collector is stopped first).
    gatewayToClose = gateway;
    try {
      await first.session();
      await synced(first);
      await core.createNamespacedEvent({ namespace: ns.name, body: warning('steady', 1) });
      await core.createNamespacedEvent({ namespace: ns.name, body: warning('growing', 1) });
      await eventually(
        'both Events at the gateway',
        () =>
          Promise.resolve(
            (stored('steady').length > 0 && stored('growing').length > 0) || undefined,
          ),
        WAIT,
      );
    } finally {
      await first.stop();
    }

    // While the collector is down, one series grows.
    const growing = await core.readNamespacedEvent({ name: 'growing', namespace: ns.name });
    await core.replaceNamespacedEvent({
      name: 'growing',
      namespace: ns.name,
      body: Object.assign(growing, { count: 4, lastTimestamp: new Date() }),
    });

    await using second = await startStateCollector(kubeconfigPath, EVENTS_ONLY, { gateway });
    await synced(second);
    await eventually(
      'the grown series and the repeat of the steady one',
      () =>
        Promise.resolve(
          (stored('growing').includes(4) &&
            deliveries.some((d) => d.name === 'steady' && !d.isNew)) ||
            undefined,
        ),
      WAIT,
    );
    expect(stored('steady')).toEqual([1]);
    expect(stored('growing')).toEqual([1, 4]);
    // The restart did send it again: the gateway's id, not the collector, kept it out.
    expect(deliveries.filter((d) => d.name === 'steady').map((d) => d.isNew)).toEqual([
      true,
      false,
    ]);
  }, 120_000);

  it('watches core/v1 Events where events.k8s.io/v1 is not served', async () => {
    // The collector's identity for the proxy: a token (a client certificate would end there).
    const account = `events-reader-${String(Date.now() % 100000)}`;
    await core.createNamespacedServiceAccount({
      namespace: ns.name,
      body: { metadata: { name: account } },
    });
    await rbac.createClusterRoleBinding({
      body: {
        metadata: { name: account },
        roleRef: {
          apiGroup: 'rbac.authorization.k8s.io',
          kind: 'ClusterRole',
          name: 'cluster-admin',
        },
        subjects: [{ kind: 'ServiceAccount', name: account, namespace: ns.name }],
      },
    });
    // The aggregated /apis document lists events.k8s.io too: the proxy refuses its media type
    // (406, as a strict proxy does), so discovery reads each group version and meets the 404.
    const proxy = await startRecordingProxy(kc, (_method, path, accept) => {
      if (path === '/apis' && accept.includes('apidiscovery.k8s.io')) {
        return { status: 406, body: { kind: 'Status', code: 406, message: 'not acceptable' } };
      }
      return path.startsWith('/apis/events.k8s.io')
        ? {
            status: 404,
            body: {
              kind: 'Status',
              apiVersion: 'v1',
              metadata: {},
              status: 'Failure',
              message: 'the server could not find the requested resource',
              reason: 'NotFound',
              details: {},
              code: 404,
            },
          }
        : undefined;
    });
    try {
      const token = await core.createNamespacedServiceAccountToken({
        name: account,
        namespace: ns.name,
        body: { spec: { audiences: [], expirationSeconds: 600 } },
      });
      await using running = await startStateCollector(kubeconfigPath, EVENTS_ONLY, {
        acceptedPayloads: [PAYLOAD_KUBE_EVENT],
        kube: proxy.kubeConfigFor(token.status?.token ?? ''),
      });
      await running.session();
      await synced(running);
      await core.createNamespacedEvent({ namespace: ns.name, body: warning('legacy', 2) });
      const arrived = await eventually(
        'the core/v1 Event at the gateway',
        () =>
          Promise.resolve(
            running.messages
              .flatMap(kubeEvent)
              .find((e) => e.name === 'legacy' && e.namespace === ns.name),
          ),
        WAIT,
      );
      expect(arrived).toMatchObject({
        type: 'Warning',
        reason: 'Flapping',
        note: 'legacy happened',
        count: 2,
        reportingController: 'kubexa-test',
        regarding: { kind: 'ConfigMap', name: 'settings', namespace: ns.name },
      });
      expect(
        running.logs.raw.some(
          (l) => l.includes('"apiVersion":"v1"') && l.includes('kubernetes events watch started'),
        ),
      ).toBe(true);
      // It asked events.k8s.io/v1 once (the 404), then listed and watched core/v1 only.
      const paths = proxy.exchanges.map((e) => `${String(e.status)} ${e.path.split('?')[0] ?? ''}`);
      expect(paths.filter((p) => p.includes('events.k8s.io'))).toEqual([
        '404 /apis/events.k8s.io/v1',
      ]);
      expect(paths).toContain('200 /api/v1/events');
    } finally {
      await proxy.close();
      await rbac.deleteClusterRoleBinding({ name: account });
    }
  }, 120_000);
});
