// The registry of container logs: the tail applies on first sight of a container only, a
// release reaches the log that enqueued the batch, an instance read to its end is finishable
// once nothing of it is outstanding, and the sweep keeps what is live or outstanding.
import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { FakeClock } from '../../../test/helpers/fake-clock.js';
import { LogBatch } from '../../../proto/index.js';
import { memoryOnlyCheckpoints, type SavedCheckpoint } from './checkpoint-store.js';
import { DEFAULT_INGEST_LIMITS } from './container-log.js';
import { LogRegistry } from './log-registry.js';

const podWith = (uid: string, labels: Record<string, string>): V1Pod => ({
  metadata: { name: 'web-1', namespace: 'prod', uid, labels },
  spec: { nodeName: 'node-a', containers: [{ name: 'app' }] },
});
const pod = podWith('uid-1', { app: 'web' });
const line = (nanos: number): string => `2025-03-01T10:00:07.${String(nanos).padStart(9, '0')}Z x`;

function registry(saved?: SavedCheckpoint) {
  return new LogRegistry({
    clock: new FakeClock(),
    store: () => (saved ? { ...memoryOnlyCheckpoints, load: () => saved } : memoryOnlyCheckpoints),
    limits: () => DEFAULT_INGEST_LIMITS,
    maxBatchEntries: 1,
    maxBatchBytes: 1 << 20,
    workloadOf: () => ({ name: 'web', kind: 'Deployment' }),
    dropped: () => undefined,
    truncated: () => undefined,
  });
}

describe('LogRegistry', () => {
  it('tails a container on first sight only: not a later instance, not after a checkpoint', () => {
    const logs = registry();
    const first = logs.open(pod, 'app', 0);
    expect(first.tail).toBe(true);
    expect(logs.open(pod, 'app', 0)).toEqual(first);
    expect(logs.open(pod, 'app', 1).tail).toBe(false);
    first.tracked.tailPending = false;
    expect(logs.open(pod, 'app', 0).tail).toBe(false);
    const resumed = registry({ position: { sec: 1, nanos: 0, count: 0 }, intents: [] });
    expect(resumed.open(pod, 'app', 0).tail).toBe(false);
  });

  it('hands a release to the log that enqueued the batch, and ignores ids it does not know', () => {
    const logs = registry();
    const { tracked } = logs.open(pod, 'app', 0);
    tracked.log.accept(line(1), false, 0);
    tracked.log.accept(line(2), false, 0);
    const [batch] = tracked.log.takeBatches(true);
    if (!batch) throw new Error('no batch cut');
    logs.enqueued(batch.messageId, tracked.log);
    expect(logs.unreleased()).toBe(1);
    logs.release(['someone-else']);
    expect(tracked.log.settle()).toBeUndefined();
    logs.release([batch.messageId]);
    expect(tracked.log.settle()?.released).toEqual([batch.messageId]);
    expect(logs.unreleased()).toBe(0);
  });

  it('tells when an idle flush has work: a held record, a batch to cut or take, a release to settle, an instance to finish', () => {
    const logs = registry();
    const { tracked } = logs.open(pod, 'app', 0);
    const { log } = tracked;
    expect(logs.hasPending()).toBe(false);
    // The joiner holds the line until the next one or its hold time.
    log.accept(line(1), false, 0);
    expect(logs.hasPending()).toBe(true);
    log.flushJoiner(0, false);
    // Its record filled a batch (one entry): cut, not yet taken.
    expect(logs.hasPending()).toBe(true);
    const [batch] = log.takeBatches(true);
    if (!batch) throw new Error('no batch cut');
    logs.enqueued(batch.messageId, log);
    // Enqueued and not released: its release is an event of its own, not a tick's work.
    expect(logs.hasPending()).toBe(false);
    expect(logs.release(['someone-else'])).toBe(false);
    expect(logs.hasPending()).toBe(false);
    expect(logs.release([batch.messageId])).toBe(true);
    expect(logs.hasPending()).toBe(true);
    log.settle();
    expect(logs.hasPending()).toBe(false);
    // A blank line with no record pending: a partial batch (no entry) for the tick to cut.
    log.accept('2025-03-01T10:00:07.000000003Z ', false, 0);
    expect(logs.hasPending()).toBe(true);
    expect(log.takeBatches(true)).toEqual([]);
    log.settle();
    expect(logs.hasPending()).toBe(false);
    // Read to its end with nothing outstanding: to be marked finished.
    logs.readThrough(tracked);
    expect(logs.hasPending()).toBe(true);
    logs.finished(tracked);
    expect(logs.hasPending()).toBe(false);
  });

  it('has no work for an idle flush in a batch replayed from an intent, which waits for its end line', () => {
    const end = { sec: 1_740_823_207, nanos: 5, count: 1 };
    const logs = registry({ position: undefined, intents: [{ messageId: 'planned', end }] });
    const { log } = logs.open(pod, 'app', 0).tracked;
    log.beginConnection();
    log.accept(line(1), false, 0);
    log.flushJoiner(0, false);
    // Full (one entry) but pinned to its recorded end: no tick may cut it.
    expect(log.takeBatches(true)).toEqual([]);
    expect(logs.hasPending()).toBe(false);
    // Its end line: cut there, and the tick has work again.
    log.accept(line(5), false, 0);
    expect(logs.hasPending()).toBe(true);
    expect(log.takeBatches(true).map((b) => b.end)).toEqual([end]);
  });

  it('finishes an instance read to its end only once nothing of it is outstanding', () => {
    const logs = registry();
    const { tracked } = logs.open(pod, 'app', 0);
    tracked.log.accept(line(1), false, 0);
    tracked.log.accept(line(2), false, 0);
    const [batch] = tracked.log.takeBatches(true);
    if (!batch) throw new Error('no batch cut');
    logs.enqueued(batch.messageId, tracked.log);
    logs.readThrough(tracked);
    expect(tracked.readToEnd).toBe(true);
    expect(logs.finishable()).toEqual([]);
    logs.release([batch.messageId]);
    tracked.log.settle();
    expect(logs.finishable()).toEqual([tracked]);
    logs.finished(tracked);
    expect(logs.finishable()).toEqual([]);
  });

  it('sweeps the logs of pods gone with nothing outstanding, and keeps the others', () => {
    const logs = registry();
    const { tracked } = logs.open(pod, 'app', 0);
    const other = logs.open(podWith('uid-2', {}), 'app', 0);
    other.tracked.log.accept(line(1), false, 0);
    other.tracked.log.accept(line(2), false, 0);
    other.tracked.log.takeBatches(true);
    logs.sweep(new Set(['uid-3']));
    expect([...logs.values()]).toEqual([other.tracked]);
    expect(logs.find(tracked.log.instance)).toBeUndefined();
  });

  it("builds a log's entries from the pod: its identity, workload and exported labels", () => {
    const logs = registry();
    const { tracked } = logs.open(
      podWith('uid-1', { app: 'web', 'pod-template-hash': 'h' }),
      'app',
      0,
    );
    expect(tracked.meta).toEqual({ namespace: 'prod', podName: 'web-1' });
    tracked.log.accept(line(1), false, 0);
    tracked.log.accept(line(2), false, 0);
    const [batch] = tracked.log.takeBatches(true);
    const [entry] = batch ? LogBatch.decode(batch.entries).entries : [];
    expect(entry).toMatchObject({
      podName: 'web-1',
      namespace: 'prod',
      container: 'app',
      labels: { app: 'web' },
      workload: 'web',
      workloadKind: 'Deployment',
      nodeName: 'node-a',
    });
    // Exactly: the rollout's revision label is not exported.
    expect(entry?.labels).toEqual({ app: 'web' });
  });
});
