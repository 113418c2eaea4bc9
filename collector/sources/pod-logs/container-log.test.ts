import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { LogBatch } from '../../../proto/index.js';
import { openCheckpointStore, type CheckpointStore } from './checkpoint-store.js';
import { ContainerLog, DEFAULT_INGEST_LIMITS, type CutBatch } from './container-log.js';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

const instance = { podUid: 'uid-1', container: 'app', restartCount: 0 };
const meta = { namespace: 'ns', podName: 'pod' };
const base = {
  podName: 'pod',
  namespace: 'ns',
  container: 'app',
  labels: {},
  workload: '',
  workloadKind: '',
  nodeName: 'n',
};

/** Line n: several lines share each second, and pairs share the exact same timestamp. */
function logLine(n: number): string {
  const sec = 1_700_000_000 + Math.floor(n / 6);
  const nanos = Math.floor((n % 6) / 2) * 1000;
  const iso = new Date(sec * 1000).toISOString().replace('.000Z', '');
  return `${iso}.${String(nanos).padStart(9, '0')}Z line-${String(n)}`;
}

function open(store: CheckpointStore): ContainerLog {
  return new ContainerLog({
    instance,
    base,
    saved: store.load(instance),
    limits: DEFAULT_INGEST_LIMITS,
    maxBatchEntries: 4,
    maxBatchBytes: 1 << 20,
    nowMs: 0,
    onDrop: () => undefined,
  });
}

/** A gateway that stores every message once by id, as the demo gateway does. */
class Gateway {
  readonly byId = new Map<string, string[]>();
  receive(batch: CutBatch): void {
    if (!this.byId.has(batch.messageId)) {
      this.byId.set(
        batch.messageId,
        LogBatch.decode(batch.entries).entries.map((e) => Buffer.from(e.raw).toString()),
      );
    }
  }
  lines(): string[] {
    return [...this.byId.values()].flat();
  }
}

describe('ContainerLog checkpoints', () => {
  it('a crash at any point between cut, delivery and release neither skips nor repeats a line', () => {
    const total = 60;
    for (let crashAfter = 1; crashAfter < total; crashAfter += 7) {
      const dir = mkdtempSync(join(tmpdir(), 'kubexa-ckpt-'));
      dirs.push(dir);
      const path = join(dir, 'c.db');
      const gateway = new Gateway();
      // First run: read `crashAfter` lines; deliver every batch, release only half of them.
      let store = openCheckpointStore(path, () => 0);
      let log = open(store);
      log.beginConnection();
      for (let n = 0; n < crashAfter; n++) log.accept(logLine(n), false, 0);
      const batches = log.takeBatches();
      store.recordIntents(
        batches.map((b) => ({ instance, meta, intent: { messageId: b.messageId, end: b.end } })),
      );
      // The buffer is FIFO: the gateway got a prefix of the batches; a prefix (shorter or
      // longer: spilled to disk counts) was released; the rest died with the memory tier.
      const delivered = crashAfter % 3;
      const released = crashAfter % 4;
      batches.forEach((batch, i) => {
        if (i < delivered) gateway.receive(batch);
        if (i < released) log.markReleased(batch.messageId);
      });
      // Released but never delivered (on disk): the restarted buffer replays them.
      batches.slice(delivered, released).forEach((batch) => {
        gateway.receive(batch);
      });
      const moved = log.settle();
      if (moved) store.advance([{ instance, meta, ...moved }]);
      store.close(); // crash: nothing else is written

      // Second run: the server returns everything from the checkpoint's second onwards.
      store = openCheckpointStore(path, () => 0);
      log = open(store);
      const after = log.resumeAfter();
      log.beginConnection();
      const from = after ? Math.max(0, (after.sec - 1_700_000_000) * 6) : 0;
      for (let n = from; n < total; n++) log.accept(logLine(n), false, 0);
      log.flushJoiner(0, false);
      for (const batch of log.takeBatches()) gateway.receive(batch);
      store.close();
      expect(gateway.lines(), `crash after ${String(crashAfter)}`).toEqual(
        Array.from({ length: total }, (_, n) => `line-${String(n)}`),
      );
    }
  });

  it('derives the same message id for the same line range, a different one otherwise', () => {
    const dir = mkdtempSync(join(tmpdir(), 'kubexa-ckpt-'));
    dirs.push(dir);
    const store = openCheckpointStore(join(dir, 'c.db'), () => 0);
    const ids = [0, 1].map(() => {
      const log = open(store);
      log.beginConnection();
      for (let n = 0; n < 8; n++) log.accept(logLine(n), false, 0);
      return log.takeBatches().map((b) => b.messageId);
    });
    store.close();
    expect(ids[0]).toEqual(ids[1]);
    expect(new Set(ids[0]).size).toBe(2);
    expect(ids[0]?.[0]).toMatch(
      /^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/,
    );
  });

  it('removes checkpoints of a deleted pod only after the grace period', () => {
    const dir = mkdtempSync(join(tmpdir(), 'kubexa-ckpt-'));
    dirs.push(dir);
    const store = openCheckpointStore(join(dir, 'c.db'), () => 0);
    store.advance([{ instance, meta, position: { sec: 1, nanos: 0, count: 1 }, released: [] }]);
    store.markPodDeleted('uid-1', 1_000);
    expect(store.sweep(1_000)).toBe(0);
    expect(store.load(instance).position).toEqual({ sec: 1, nanos: 0, count: 1 });
    expect(store.sweep(1_001)).toBe(1);
    expect(store.load(instance).position).toBeUndefined();
    store.close();
  });
});
