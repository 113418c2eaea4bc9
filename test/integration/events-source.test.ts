// Kubernetes events and pod lifecycle events end to end: the real API server -> the collector
// (collector.ts wiring, in this process) -> the demo gateway, after the gateway opted in. Pod
// status is driven through the status subresource (the pods are bound to a node no kubelet or
// kwok manages, so nothing else writes their status) through OOMKilled, CrashLoopBackOff,
// ImagePullBackOff and Evicted: each transition arrives once with its reason. A core/v1 Event
// about a pod arrives with the pod's workload resolved, and again only when its count grows.
import { AppsV1Api, CoreV1Api, type V1Pod, type V1PodStatus } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { OPT_IN_EVENTS, OPT_IN_LIFECYCLE } from '../../collector/sources/events/events-source.js';
import {
  podLifecycleReasonToJSON,
  type KubeEvent,
  type PodLifecycleEvent,
} from '../../proto/index.js';
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
const apps = kc.makeApiClient(AppsV1Api);
const WAIT = { timeoutMs: 30_000, intervalMs: 100 };
const NO_NODE = 'no-such-node-kubexa';

let ns: TestNamespace;
beforeAll(async () => {
  ns = await createTestNamespace(kc, 'events');
});
afterAll(async () => {
  await ns.delete();
});

async function setStatus(name: string, status: V1PodStatus): Promise<void> {
  const current = await core.readNamespacedPodStatus({ name, namespace: ns.name });
  await core.replaceNamespacedPodStatus({
    name,
    namespace: ns.name,
    body: Object.assign(current, {
      status: Object.assign(status, { phase: status.phase ?? 'Running' }),
    }),
  });
}

const appStatus = (state: object, restartCount = 0, lastState: object = {}): V1PodStatus => ({
  phase: 'Running',
  containerStatuses: [
    {
      name: 'app',
      image: 'registry.invalid/app:1',
      imageID: '',
      ready: false,
      restartCount,
      state,
      lastState,
    },
  ],
});

describe('events source against the real API server', () => {
  it('sends each lifecycle transition once, and Kubernetes events with the workload, after the gateway opted in', async () => {
    await using running = await startStateCollector(kubeconfigPath, [
      'collect:',
      '  logs: { enabled: false }',
      '  state: { enabled: false }',
      '  events: { enabled: true }',
    ]);
    const session = await running.session();
    running.gateway.sendConfigUpdate(session, {
      configVersion: 'opt-in',
      config: {
        logCollectors: [],
        watchers: [
          { id: OPT_IN_LIFECYCLE, namespace: '', kinds: [], resyncSec: 0, resources: [] },
          { id: OPT_IN_EVENTS, namespace: '', kinds: [], resyncSec: 0, resources: [] },
        ],
        metricScrapers: [],
        heartbeatIntervalSec: 0,
        batchSize: 0,
        flushIntervalMs: 0,
      },
    });
    // The opt-in starts the watches: what pods show before their first list is a baseline, so
    // the Deployment comes after readiness says they synced.
    const healthPort = running.collector.health.ports().health;
    await eventually(
      'the opt-in applied and the watches synced',
      async () => {
        if (!running.logs.raw.some((l) => l.includes('gateway opted into events')))
          return undefined;
        const reply = await fetch(`http://127.0.0.1:${String(healthPort)}/readyz?verbose`);
        const body = (await reply.json()) as { components?: Record<string, { status: string }> };
        return body.components?.['source:events']?.status === 'ok' ? true : undefined;
      },
      WAIT,
    );
    const lifecycle = (): PodLifecycleEvent[] =>
      running.messages.flatMap((m) =>
        m.payload?.$case === 'podLifecycle' ? [m.payload.value] : [],
      );
    const kubeEvents = (): KubeEvent[] =>
      running.messages.flatMap((m) => (m.payload?.$case === 'kubeEvent' ? [m.payload.value] : []));
    const seen = (pod: string) =>
      lifecycle()
        .filter((e) => e.pod === pod)
        .map((e) => podLifecycleReasonToJSON(e.reason).replace('POD_LIFECYCLE_REASON_', ''));

    // A Deployment whose pods are bound to a node nobody manages: the workload resolves through
    // the ReplicaSet to the Deployment, and only this test writes their status.
    await apps.createNamespacedDeployment({
      namespace: ns.name,
      body: {
        metadata: { name: 'shop' },
        spec: {
          replicas: 3,
          selector: { matchLabels: { app: 'shop' } },
          template: {
            metadata: { labels: { app: 'shop' } },
            spec: {
              nodeName: NO_NODE,
              containers: [{ name: 'app', image: 'registry.invalid/app:1' }],
            },
          },
        },
      },
    });
    const [oom = '', pull = '', evicted = ''] = await eventually(
      'the three pods',
      async () => {
        const pods = await core.listNamespacedPod({
          namespace: ns.name,
          labelSelector: 'app=shop',
        });
        const names = pods.items.map((p) => p.metadata?.name ?? '').sort();
        return names.length === 3 ? names : undefined;
      },
      WAIT,
    );
    const marker: V1Pod = {
      metadata: { name: 'marker' },
      spec: { nodeName: NO_NODE, containers: [{ name: 'app', image: 'registry.invalid/app:1' }] },
    };

    // OOMKilled, then CrashLoopBackOff with the restart count and the last termination.
    await eventually(
      'created',
      () => Promise.resolve(seen(oom).includes('CREATED') || undefined),
      WAIT,
    );
    await setStatus(oom, appStatus({ running: { startedAt: new Date() } }));
    const oomState = { terminated: { reason: 'OOMKilled', exitCode: 137 } };
    await setStatus(oom, appStatus(oomState));
    await setStatus(
      oom,
      appStatus({ waiting: { reason: 'CrashLoopBackOff', message: 'back-off 10s' } }, 1, oomState),
    );
    // Repeated status writes of the same state: nothing new.
    await setStatus(
      oom,
      appStatus({ waiting: { reason: 'CrashLoopBackOff', message: 'back-off 20s' } }, 1, oomState),
    );
    await eventually(
      'crash loop',
      () => Promise.resolve(seen(oom).includes('CRASH_LOOP_BACK_OFF') || undefined),
      WAIT,
    );

    // Image pull failures, alternating as the kubelet does.
    for (const reason of ['ErrImagePull', 'ImagePullBackOff', 'ErrImagePull', 'ImagePullBackOff']) {
      await setStatus(pull, appStatus({ waiting: { reason, message: 'manifest unknown' } }));
    }
    // Evicted with its message.
    await setStatus(evicted, {
      phase: 'Failed',
      reason: 'Evicted',
      message: 'The node was low on resource: memory.',
    });
    await core.deleteNamespacedPod({ name: evicted, namespace: ns.name, gracePeriodSeconds: 0 });
    await eventually(
      'deleted',
      () => Promise.resolve(seen(evicted).includes('DELETED') || undefined),
      WAIT,
    );
    await eventually(
      'image pull',
      () => Promise.resolve(seen(pull).includes('IMAGE_PULL_BACK_OFF') || undefined),
      WAIT,
    );

    expect(seen(oom)).toEqual(['CREATED', 'STARTED', 'OOM_KILLED', 'CRASH_LOOP_BACK_OFF']);
    expect(seen(pull)).toEqual(['CREATED', 'ERR_IMAGE_PULL', 'IMAGE_PULL_BACK_OFF']);
    expect(seen(evicted)).toEqual(['CREATED', 'EVICTED', 'DELETED']);
    const crash = lifecycle().find((e) => e.pod === oom && e.reason === 4);
    expect(crash).toMatchObject({
      container: 'app',
      node: NO_NODE,
      restartCount: 1,
      exitCode: 137,
      terminationReason: 'OOMKilled',
      namespace: ns.name,
      workload: { kind: 'Deployment', name: 'shop' },
    });
    const eviction = lifecycle().find((e) => e.pod === evicted && e.reason === 5);
    expect(eviction?.message).toBe('The node was low on resource: memory.');

    // A Kubernetes Event about the pod: the involved object and its workload; a grown count is
    // a new message, a change that keeps the count is not.
    const now = new Date();
    await core.createNamespacedEvent({
      namespace: ns.name,
      body: {
        metadata: { name: 'oom.backoff' },
        involvedObject: { kind: 'Pod', name: oom, namespace: ns.name, apiVersion: 'v1' },
        reason: 'BackOff',
        message: 'Back-off restarting failed container app',
        type: 'Warning',
        count: 1,
        firstTimestamp: now,
        lastTimestamp: now,
        source: { component: 'kubelet' },
      },
    });
    const first = await eventually(
      'the event',
      () => Promise.resolve(kubeEvents().find((e) => e.name === 'oom.backoff')),
      WAIT,
    );
    expect(first).toMatchObject({
      type: 'Warning',
      reason: 'BackOff',
      count: 1,
      regarding: { kind: 'Pod', name: oom, namespace: ns.name },
      workload: { kind: 'Deployment', name: 'shop' },
    });
    const event = await core.readNamespacedEvent({ name: 'oom.backoff', namespace: ns.name });
    await core.replaceNamespacedEvent({
      name: 'oom.backoff',
      namespace: ns.name,
      body: Object.assign(event, { count: 3 }),
    });
    await eventually(
      'the grown series',
      () => Promise.resolve(kubeEvents().some((e) => e.count === 3) || undefined),
      WAIT,
    );
    const again = await core.readNamespacedEvent({ name: 'oom.backoff', namespace: ns.name });
    await core.replaceNamespacedEvent({
      name: 'oom.backoff',
      namespace: ns.name,
      body: Object.assign(again, {
        metadata: Object.assign(again.metadata, { labels: { touched: 'yes' } }),
      }),
    });
    // A marker after it: once the marker is in, the label-only change would have been too.
    await core.createNamespacedPod({ namespace: ns.name, body: marker });
    await eventually(
      'marker',
      () => Promise.resolve(seen('marker').includes('CREATED') || undefined),
      WAIT,
    );
    expect(
      kubeEvents()
        .filter((e) => e.name === 'oom.backoff')
        .map((e) => e.count),
    ).toEqual([1, 3]);
  }, 180_000);
});
