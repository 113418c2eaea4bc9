// Lifecycle transitions from pod status, each reported once: OOMKilled, CrashLoopBackOff with the
// restart count and last termination, Evicted with its message, image pull failures (the kubelet
// alternating ErrImagePull and ImagePullBackOff reports each once), Completed, Deleted.
import { describe, expect, it } from 'vitest';
import type { KubeObject } from '../../watch/kube-list-watch.js';
import { LifecycleTracker, podTransitions, summarizePod } from './pod-lifecycle.js';

function pod(status: Record<string, unknown>, resourceVersion = '1'): KubeObject {
  return {
    metadata: {
      name: 'p',
      namespace: 'ns',
      uid: 'u1',
      resourceVersion,
      ownerReferences: [{ kind: 'ReplicaSet', name: 'web-5d4f', controller: true }],
    },
    spec: { nodeName: 'node-1' },
    status,
  };
}

const container = (state: Record<string, unknown>, restartCount = 0, lastState = {}) => ({
  containerStatuses: [{ name: 'app', restartCount, state, lastState }],
});

/** Every reason reported along a sequence of statuses, through one tracker. */
function reasons(statuses: Record<string, unknown>[]): string[] {
  const tracker = new LifecycleTracker();
  const out: string[] = [];
  let before: ReturnType<typeof summarizePod> | undefined;
  statuses.forEach((status, i) => {
    const now = summarizePod(pod(status, String(i + 1)));
    for (const t of tracker.fresh(now.uid, podTransitions(before, now))) {
      out.push(
        [t.reason, t.container, t.restartCount, t.exitCode, t.terminationReason, t.message]
          .filter((f) => f !== '' && f !== 0)
          .join(' '),
      );
    }
    before = now;
  });
  return out;
}

describe('pod lifecycle transitions', () => {
  it('created, started, then an OOM kill and a crash loop with the restart count and last termination', () => {
    const oom = { terminated: { reason: 'OOMKilled', exitCode: 137 } };
    expect(
      reasons([
        { phase: 'Pending' },
        container({ running: { startedAt: 't1' } }),
        container(oom),
        container({ waiting: { reason: 'CrashLoopBackOff', message: 'back-off 10s' } }, 1, oom),
        // The same state again (a resync or an unrelated change): nothing new.
        container({ waiting: { reason: 'CrashLoopBackOff', message: 'back-off 10s' } }, 1, oom),
        container({ running: { startedAt: 't2' } }, 1, oom),
        container({ waiting: { reason: 'CrashLoopBackOff' } }, 2, oom),
      ]),
    ).toEqual([
      'CREATED',
      'STARTED app',
      'OOM_KILLED app 137 OOMKilled',
      'CRASH_LOOP_BACK_OFF app 1 137 OOMKilled back-off 10s',
      'STARTED app 1',
      // The second kill (of instance 1), seen only as the last state after the restart.
      'OOM_KILLED app 1 137 OOMKilled',
      'CRASH_LOOP_BACK_OFF app 2 137 OOMKilled',
    ]);
  });

  it('image pull failures once each, however often the kubelet alternates them', () => {
    const pull = (reason: string) => container({ waiting: { reason, message: 'not found' } });
    expect(
      reasons([
        {},
        pull('ErrImagePull'),
        pull('ImagePullBackOff'),
        pull('ErrImagePull'),
        pull('ImagePullBackOff'),
      ]),
    ).toEqual(['CREATED', 'ERR_IMAGE_PULL app not found', 'IMAGE_PULL_BACK_OFF app not found']);
  });

  it('evicted with its message, completed, and deleted', () => {
    expect(
      reasons([
        {},
        { phase: 'Failed', reason: 'Evicted', message: 'The node was low on resource: memory.' },
      ]),
    ).toEqual(['CREATED', 'EVICTED The node was low on resource: memory.']);
    expect(reasons([{}, container({ terminated: { reason: 'Completed', exitCode: 0 } })])).toEqual([
      'CREATED',
      'COMPLETED app Completed',
    ]);
    const last = summarizePod(pod({}));
    expect(podTransitions(last, undefined).map((t) => t.reason)).toEqual(['DELETED']);
  });

  it('summarizes node, owner and init containers', () => {
    const summary = summarizePod(
      pod({ initContainerStatuses: [{ name: 'init', restartCount: 0, state: {} }] }),
    );
    expect(summary).toMatchObject({
      node: 'node-1',
      owner: { kind: 'ReplicaSet', name: 'web-5d4f' },
      key: 'ns/p',
    });
    expect(summary.containers.map((c) => c.name)).toEqual(['init']);
  });
});
