// One pod watch for logs, state and lifecycle (collector/watch/shared-watch.ts), against the real
// API server through a proxy that records every request as it arrives: with the log source, a
// cluster-wide pods state rule and pod lifecycle events all on, the collector lists pods once and
// watches them once, and each user still does its own work (a StateEvent ADDED for a new pod, its
// lifecycle CREATED, sanitized state JSON).
import { CoreV1Api, RbacAuthorizationV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import {
  PAYLOAD_KUBE_EVENT,
  PAYLOAD_POD_LIFECYCLE,
} from '../../collector/sources/events/opt-in.js';
import {
  createTestNamespace,
  eventually,
  loadKubeConfig,
  type TestNamespace,
} from '../helpers/kube.js';
import { startRecordingProxy, type RecordingProxy } from '../helpers/recording-proxy.js';
import { startStateCollector, type RunningStateCollector } from './state-collector.js';

const kubeconfigPath = inject('kubeconfigPath');
const kc = loadKubeConfig(kubeconfigPath);
const core = kc.makeApiClient(CoreV1Api);
const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
const WAIT = { timeoutMs: 60_000, intervalMs: 100 };
const ALL_ON = [
  'collect:',
  '  logs: { enabled: true }',
  '  metrics: { enabled: false }',
  '  state:',
  '    rules: [{resources: [pods]}]',
  '  events: { enabled: true }',
];

let ns: TestNamespace;
let proxy: RecordingProxy;
let token = '';
const account = `shared-watch-${String(Date.now() % 100000)}`;
beforeAll(async () => {
  ns = await createTestNamespace(kc, 'shared-watch');
  // The collector's identity for the proxy: a token (a client certificate would end there).
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
  const issued = await core.createNamespacedServiceAccountToken({
    name: account,
    namespace: ns.name,
    body: { spec: { audiences: [], expirationSeconds: 600 } },
  });
  token = issued.status?.token ?? '';
  proxy = await startRecordingProxy(kc);
}, 60_000);
afterAll(async () => {
  await proxy.close();
  await rbac.deleteClusterRoleBinding({ name: account }).catch(() => undefined);
  await ns.delete();
});

/**
 * Requests for every pod in the cluster (the shared watch's target), lists and watches apart; a
 * list's further pages (continue=) are the same list.
 */
function podRequests(): { lists: string[]; watches: string[] } {
  const all = proxy.requests
    .filter((r) => r.method === 'GET' && /^\/api\/v1\/pods(\?|$)/.test(r.path))
    .map((r) => r.path);
  return {
    lists: all.filter((path) => !/[?&](watch=1|continue=)/.test(path)),
    watches: all.filter((path) => /[?&]watch=1(&|$)/.test(path)),
  };
}

async function ready(running: RunningStateCollector): Promise<void> {
  const port = running.collector.health.ports().health;
  await eventually(
    'every source synced',
    async () => {
      const reply = await fetch(`http://127.0.0.1:${String(port)}/readyz?verbose`);
      const body = (await reply.json()) as { components?: Record<string, { status: string }> };
      const c = body.components ?? {};
      return ['source:state', 'source:events', 'source:logs'].every(
        (name) => c[name] === undefined || c[name].status === 'ok',
      ) && reply.status === 200
        ? true
        : undefined;
    },
    WAIT,
  );
}

describe('one pod watch for logs, state and lifecycle', () => {
  it('lists and watches every pod once while all three users get their own changes', async () => {
    await using running = await startStateCollector(kubeconfigPath, ALL_ON, {
      acceptedPayloads: [PAYLOAD_POD_LIFECYCLE, PAYLOAD_KUBE_EVENT],
      kube: proxy.kubeConfigFor(token),
    });
    await running.session();
    await ready(running);
    await core.createNamespacedPod({
      namespace: ns.name,
      body: {
        metadata: {
          name: 'shared',
          annotations: { 'kubectl.kubernetes.io/last-applied-configuration': '{"x":1}' },
        },
        spec: {
          nodeName: 'no-such-node-kubexa',
          containers: [{ name: 'app', image: 'registry.invalid/a:1' }],
        },
      },
    });
    // The state rule's ADDED, sanitized, and the lifecycle's CREATED, both off the one watch.
    const added = await eventually(
      'the pod ADDED at the gateway',
      () =>
        Promise.resolve(
          running.states.find(
            (s) => s.type === 'ADDED' && s.name === 'shared' && s.namespace === ns.name,
          ),
        ),
      WAIT,
    );
    const metadata = added.object['metadata'] as Record<string, unknown>;
    expect(metadata['managedFields']).toBeUndefined();
    expect(metadata['annotations']).toBeUndefined();
    await eventually(
      'the pod CREATED at the gateway',
      () =>
        Promise.resolve(
          running.messages.find(
            (m) =>
              m.payload?.$case === 'podLifecycle' &&
              m.payload.value.pod === 'shared' &&
              m.payload.value.namespace === ns.name,
          ),
        ),
      WAIT,
    );
    const { lists, watches } = podRequests();
    expect({ lists: lists.length, watches: watches.length }).toEqual({ lists: 1, watches: 1 });
  }, 120_000);
});
