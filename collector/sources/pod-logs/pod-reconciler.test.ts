// The reconciler on a real checkpoint file: which containers are followed as pods come, change
// and go; a relist that misses a pod ends its streams; the checkpoints of pods deleted while the
// collector was down are removed once every namespace has been listed, and only then; the sweep
// forgets sessions of pods gone.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { V1Pod } from '@kubernetes/client-node';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { FakeClock } from '../../../test/helpers/fake-clock.js';
import { openCheckpointStore, type CheckpointStore } from './checkpoint-store.js';
import { DEFAULT_INGEST_LIMITS } from './container-log.js';
import { compileEligibility } from './eligibility.js';
import { LogRegistry } from './log-registry.js';
import { noopPodLogCounters } from './pod-log-source.js';
import { PodReconciler, namespacesToWatch } from './pod-reconciler.js';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

const podOf = (uid: string, namespace: string, containers: string[]): V1Pod => ({
  metadata: { name: `pod-${uid}`, namespace, uid },
  spec: { nodeName: 'node-a', containers: containers.map((name) => ({ name })) },
  status: {
    phase: 'Running',
    containerStatuses: containers.map((name) => ({
      name,
      image: 'app:1',
      imageID: '',
      ready: true,
      restartCount: 0,
      state: { running: { startedAt: new Date(0) } },
    })),
  },
});

const rule = (namespace: string) => ({
  id: `rule-${namespace}`,
  namespace,
  pod_names: [],
  label_selector: '',
  field_selector: '',
  containers: [],
});

function setup(namespaces: string[]) {
  const dir = mkdtempSync(join(tmpdir(), 'kubexa-reconciler-'));
  dirs.push(dir);
  const clock = new FakeClock();
  const logger = pino({ level: 'silent' });
  const store: CheckpointStore = openCheckpointStore(join(dir, 'pod-logs.db'), () => clock.now());
  const registry = new LogRegistry({
    clock,
    store: () => store,
    limits: () => DEFAULT_INGEST_LIMITS,
    maxBatchEntries: 10,
    maxBatchBytes: 1 << 20,
    workloadOf: () => undefined,
    dropped: () => undefined,
    truncated: () => undefined,
  });
  const wanted = new Set<string>();
  const reconciler = new PodReconciler({
    logger,
    clock,
    eligible: compileEligibility({
      tail_lines: 0,
      follow: true,
      exclude_namespaces: ['kube-system'],
      rules: namespaces.map(rule),
    }),
    context: {
      logger,
      clock,
      registry,
      store: () => store,
      connection: {
        clock,
        logs: { read: () => Promise.reject(new Error('the reconciler never reads a log')) },
        idleMs: 60_000,
        maxLineBytes: DEFAULT_INGEST_LIMITS.maxLineBytes,
        countRead: () => undefined,
        requestFlush: () => undefined,
      },
      resolveWorkload: () => Promise.resolve(),
      counters: noopPodLogCounters,
    },
    registry,
    store: () => store,
    streams: () => ({
      want: (key) => wanted.add(key),
      unwant: (key) => wanted.delete(key),
    }),
    namespaces: namespacesToWatch(namespaces.map(rule)),
    checkpointGraceMs: 10 * 60_000,
  });
  return { reconciler, wanted, store, clock };
}

/** A checkpoint row for a pod, as an earlier run would have left it. */
function checkpointOf(store: CheckpointStore, podUid: string, namespace: string): void {
  store.advance([
    {
      instance: { podUid, container: 'app', restartCount: 0 },
      meta: { namespace, podName: `pod-${podUid}` },
      position: { sec: 1, nanos: 0, count: 0 },
      released: [],
    },
  ]);
}

describe('PodReconciler', () => {
  it('follows every eligible container, lets go of one that is no longer eligible or whose pod left the list', () => {
    const { reconciler, wanted } = setup(['prod']);
    reconciler.replace('prod', [podOf('a', 'prod', ['app', 'sidecar'])]);
    expect([...wanted].sort()).toEqual(['a/app', 'a/sidecar']);
    expect(reconciler.session('a/app')?.wanted?.pod.metadata?.uid).toBe('a');

    reconciler.upsert('prod', podOf('a', 'prod', ['app']));
    expect([...wanted]).toEqual(['a/app']);
    expect(reconciler.session('a/sidecar')?.wanted).toBeUndefined();

    reconciler.upsert('prod', podOf('b', 'prod', ['web']));
    expect([...wanted].sort()).toEqual(['a/app', 'b/web']);
    // A relist that no longer holds pod a: its stream ends, b's goes on.
    reconciler.replace('prod', [podOf('b', 'prod', ['web'])]);
    expect([...wanted]).toEqual(['b/web']);
  });

  it('keeps the checkpoints of a deleted pod for the grace period, then the sweep removes them and its sessions', () => {
    const { reconciler, wanted, store, clock } = setup(['prod']);
    const pod = podOf('a', 'prod', ['app']);
    reconciler.replace('prod', [pod]);
    checkpointOf(store, 'a', 'prod');
    reconciler.remove(pod);
    expect(wanted.size).toBe(0);
    reconciler.sweep();
    expect(store.podUids()).toEqual(['a']);
    expect(reconciler.session('a/app')).toBeUndefined();
    clock.advance(10 * 60_000 + 1);
    reconciler.sweep();
    expect(store.podUids()).toEqual([]);
  });

  it('removes the checkpoints of pods deleted while down once every namespace was listed, not before, and once', () => {
    const { reconciler, store } = setup(['prod', 'dev']);
    checkpointOf(store, 'gone', 'prod');
    checkpointOf(store, 'live', 'dev');
    reconciler.replace('prod', []);
    // dev is not listed yet: the pod 'live' may be there.
    expect(store.podUids().sort()).toEqual(['gone', 'live']);
    reconciler.replace('dev', [podOf('live', 'dev', ['app'])]);
    expect(store.podUids()).toEqual(['live']);
    // Later lists never sweep again: a checkpoint written since belongs to a pod being followed.
    checkpointOf(store, 'later', 'prod');
    reconciler.replace('prod', []);
    reconciler.replace('dev', []);
    expect(store.podUids().sort()).toEqual(['later', 'live']);
  });

  it('watches every namespace when a rule names none', () => {
    expect(namespacesToWatch([rule('prod'), rule('')])).toEqual(['']);
    expect(namespacesToWatch([])).toEqual(['']);
    expect(namespacesToWatch([rule('prod'), rule(' prod '), rule('dev')])).toEqual(['prod', 'dev']);
  });
});
