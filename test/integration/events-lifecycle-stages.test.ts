// Pod lifecycle events from pods kwok itself drives, as a kubelet would report them: nothing in
// this test writes a pod's status. kwok plays the harness's Stages (test/cluster/stages.yaml) on
// pods labelled kubexa.test/lifecycle, and its default Stages on the rest:
// - crash, 137/OOMKilled: running -> OOMKilled -> CrashLoopBackOff (restart 1, last 137 OOMKilled)
// - crash, 1/Error: running -> Error -> CrashLoopBackOff (restart 1, last 1 Error)
// - evict: running -> Failed/Evicted with the kubelet's message
// - image-pull: ErrImagePull -> ImagePullBackOff -> ErrImagePull -> ImagePullBackOff
// - a Job's pod: kwok's default pod-complete Stage -> Succeeded, Completed
// Each transition reaches the demo gateway exactly once with its reason, pod, container, node and
// workload, then DELETED when the pod goes (kwok's pod-delete Stage finishes the deletion).
import { AppsV1Api, BatchV1Api, CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import {
  PAYLOAD_KUBE_EVENT,
  PAYLOAD_POD_LIFECYCLE,
} from '../../collector/sources/events/opt-in.js';
import { podLifecycleReasonToJSON, type PodLifecycleEvent } from '../../proto/index.js';
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
const batch = kc.makeApiClient(BatchV1Api);
const WAIT = { timeoutMs: 60_000, intervalMs: 200 };
const NODE = 'kwok-node-0';
const EVICTION_MESSAGE =
  'The node was low on resource: memory. Threshold quantity: 100Mi, available: 64Mi. Container app was using 512Mi, request is 0, has larger consumption of memory. ';

let ns: TestNamespace;
beforeAll(async () => {
  ns = await createTestNamespace(kc, 'lifecycle-stages');
});
afterAll(async () => {
  await ns.delete();
});

const pod = (name: string, scenario: string, annotations: Record<string, string> = {}): V1Pod => ({
  metadata: { name, labels: { 'kubexa.test/lifecycle': scenario }, annotations },
  spec: { nodeName: NODE, containers: [{ name: 'app', image: 'registry.invalid/app:1' }] },
});

/** The pod's status as kwok last wrote it (a string that says where its Stages have got to). */
async function statusOf(name: string): Promise<string> {
  const current = await core.readNamespacedPodStatus({ name, namespace: ns.name });
  const container = current.status?.containerStatuses?.[0];
  const state = container?.state;
  const where =
    state?.waiting?.message ?? state?.terminated?.reason ?? (state?.running ? 'running' : '');
  return `${current.status?.phase ?? ''}/${current.status?.reason ?? ''}/${where}`;
}

describe('pod lifecycle events from pods kwok drives through its Stages', () => {
  it('OOMKilled, CrashLoopBackOff, Evicted, image pull failures and Completed each arrive once with their reason', async () => {
    await using running = await startStateCollector(
      kubeconfigPath,
      [
        'collect:',
        '  logs: { enabled: false }',
        '  state: { enabled: false }',
        '  events: { enabled: true, kubernetes_events: false }',
      ],
      { acceptedPayloads: [PAYLOAD_POD_LIFECYCLE, PAYLOAD_KUBE_EVENT] },
    );
    await running.session();
    const healthPort = running.collector.health.ports().health;
    await eventually(
      'the lifecycle watch synced',
      async () => {
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
    const reasonName = (e: PodLifecycleEvent) =>
      podLifecycleReasonToJSON(e.reason).replace('POD_LIFECYCLE_REASON_', '');
    const seen = (name: string) =>
      lifecycle()
        .filter((e) => e.pod === name)
        .map(reasonName);
    const event = (name: string, reason: string) =>
      lifecycle().find((e) => e.pod === name && reasonName(e) === reason);

    // A Deployment's pod that kwok runs into an OOM kill and a crash loop: the workload resolves.
    await apps.createNamespacedDeployment({
      namespace: ns.name,
      body: {
        metadata: { name: 'shop' },
        spec: {
          replicas: 1,
          selector: { matchLabels: { app: 'shop' } },
          template: {
            metadata: {
              labels: { app: 'shop', 'kubexa.test/lifecycle': 'crash' },
              annotations: {
                'kubexa.test/exit-code': '137',
                'kubexa.test/exit-reason': 'OOMKilled',
              },
            },
            spec: {
              nodeName: NODE,
              containers: [{ name: 'app', image: 'registry.invalid/app:1' }],
            },
          },
        },
      },
    });
    await core.createNamespacedPod({
      namespace: ns.name,
      body: pod('crasher', 'crash', {
        'kubexa.test/exit-code': '1',
        'kubexa.test/exit-reason': 'Error',
      }),
    });
    await core.createNamespacedPod({ namespace: ns.name, body: pod('evicted', 'evict') });
    await core.createNamespacedPod({ namespace: ns.name, body: pod('puller', 'image-pull') });
    await batch.createNamespacedJob({
      namespace: ns.name,
      body: {
        metadata: { name: 'report' },
        spec: {
          backoffLimit: 0,
          template: {
            spec: {
              restartPolicy: 'Never',
              nodeName: NODE,
              containers: [{ name: 'app', image: 'registry.invalid/report:1' }],
            },
          },
        },
      },
    });
    const oom = await eventually(
      'the Deployment pod',
      async () =>
        (await core.listNamespacedPod({ namespace: ns.name, labelSelector: 'app=shop' })).items[0]
          ?.metadata?.name,
      WAIT,
    );
    const completed = await eventually(
      'the Job pod',
      async () =>
        (
          await core.listNamespacedPod({
            namespace: ns.name,
            labelSelector: 'batch.kubernetes.io/job-name=report',
          })
        ).items[0]?.metadata?.name,
      WAIT,
    );

    // kwok plays each chain to its end state; only then is "once" worth checking.
    const ends: Record<string, string> = {
      [oom]: 'Running//back-off 10s restarting failed container=app pod=' + oom,
      crasher: 'Running//back-off 10s restarting failed container=app pod=crasher',
      evicted: 'Failed/Evicted/Error',
      puller: 'Pending//Back-off pulling image (attempt 2)',
      [completed]: 'Succeeded//Completed',
    };
    for (const [name, end] of Object.entries(ends)) {
      await eventually(
        `kwok drove ${name} to ${end}`,
        async () => ((await statusOf(name)) === end ? true : undefined),
        WAIT,
      );
    }
    // Deleting each pod (kwok's pod-delete Stage finishes it): its DELETED comes after every
    // status change the watch carried before, so the lists below are complete.
    await apps.deleteNamespacedDeployment({ name: 'shop', namespace: ns.name });
    await batch.deleteNamespacedJob({
      name: 'report',
      namespace: ns.name,
      propagationPolicy: 'Background',
    });
    for (const name of Object.keys(ends)) {
      await core.deleteNamespacedPod({ name, namespace: ns.name }).catch(() => undefined);
    }
    for (const name of Object.keys(ends)) {
      await eventually(
        `${name} deleted`,
        () => Promise.resolve(seen(name).includes('DELETED') || undefined),
        WAIT,
      );
    }

    // In order. A Deployment pod's STARTED once reached the gateway before its CREATED: each was
    // sent after its own lookup of the pod's workload, and the second GET came back first. Asks
    // for one owner now share one lookup and are answered in order (workload.ts, its unit test).
    expect(seen(oom)).toEqual([
      'CREATED',
      'STARTED',
      'OOM_KILLED',
      'CRASH_LOOP_BACK_OFF',
      'DELETED',
    ]);
    expect(seen('crasher')).toEqual(['CREATED', 'STARTED', 'CRASH_LOOP_BACK_OFF', 'DELETED']);
    expect(seen('evicted')).toEqual(['CREATED', 'STARTED', 'EVICTED', 'DELETED']);
    expect(seen('puller')).toEqual(['CREATED', 'ERR_IMAGE_PULL', 'IMAGE_PULL_BACK_OFF', 'DELETED']);
    // kwok's default Stages take the Job's pod Pending -> Running -> Succeeded in two writes back
    // to back, with no delay. One run saw CREATED, COMPLETED, DELETED: the collector met the pod
    // only once it had finished (its lifecycle watch opened, or re-listed, between the writes),
    // and a state it never saw owes no STARTED. What is owed: COMPLETED once, STARTED at most
    // once. The pods above still owe their STARTED (their Stages wait 500 ms).
    const jobPod = seen(completed);
    expect(jobPod.filter((type) => type !== 'STARTED')).toEqual([
      'CREATED',
      'COMPLETED',
      'DELETED',
    ]);
    expect(jobPod.filter((type) => type === 'STARTED').length).toBeLessThanOrEqual(1);

    const common = { namespace: ns.name, container: 'app', node: NODE };
    expect(event(oom, 'OOM_KILLED')).toMatchObject({
      ...common,
      exitCode: 137,
      terminationReason: 'OOMKilled',
      workload: { kind: 'Deployment', name: 'shop' },
    });
    expect(event(oom, 'CRASH_LOOP_BACK_OFF')).toMatchObject({
      ...common,
      restartCount: 1,
      exitCode: 137,
      terminationReason: 'OOMKilled',
      message: `back-off 10s restarting failed container=app pod=${oom}`,
      workload: { kind: 'Deployment', name: 'shop' },
    });
    expect(event('crasher', 'CRASH_LOOP_BACK_OFF')).toMatchObject({
      ...common,
      restartCount: 1,
      exitCode: 1,
      terminationReason: 'Error',
    });
    expect(event('evicted', 'EVICTED')).toMatchObject({
      namespace: ns.name,
      node: NODE,
      message: EVICTION_MESSAGE,
    });
    expect(event('puller', 'ERR_IMAGE_PULL')?.message).toBe(
      'failed to pull image: not found (attempt 1)',
    );
    expect(event('puller', 'IMAGE_PULL_BACK_OFF')?.message).toBe(
      'Back-off pulling image (attempt 1)',
    );
    expect(event(completed, 'COMPLETED')).toMatchObject({
      ...common,
      terminationReason: 'Completed',
      workload: { kind: 'Job', name: 'report' },
    });
  }, 240_000);
});
