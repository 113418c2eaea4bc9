import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { LogBatch } from '../../../proto/index.js';
import {
  openCheckpointStore,
  type CheckpointStore,
  type ContainerInstance,
} from './checkpoint-store.js';
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

/**
 * The log of the crash tests: several lines per second and pairs on the exact same timestamp;
 * multi-line records (an exception and two frames), blank lines, and lines longer than the rate
 * limit's burst (always refused, whatever the bucket holds). Each text line carries `line-<n>`.
 */
const TOTAL = 64;
const isBlank = (n: number): boolean => n % 10 === 7;
const isOverBurst = (n: number): boolean => n % 20 === 9;
function crashLogLine(n: number): string {
  const sec = 1_700_000_000 + Math.floor(n / 6);
  const nanos = Math.floor((n % 6) / 2) * 1000;
  const iso = new Date(sec * 1000).toISOString().replace('.000Z', '');
  let text = `line-${String(n)}`;
  if (isBlank(n)) text = '';
  else if (isOverBurst(n)) text = `line-${String(n)} ${'x'.repeat(400)}`;
  else if (n % 10 === 3) text = `java.lang.IllegalStateException: line-${String(n)}`;
  else if (n % 10 === 4 || n % 10 === 5) text = `\tat com.example.App.run(line-${String(n)})`;
  return `${iso}.${String(nanos).padStart(9, '0')}Z ${text}`;
}
/** Every line that must reach the gateway once: all but the blank and the refused ones. */
const EXPECTED = Array.from({ length: TOTAL }, (_, n) => n).filter(
  (n) => !isBlank(n) && !isOverBurst(n),
);
/** 1,000 bytes per ms: the bucket is full again at every line; the burst refuses only 400 B lines. */
const CRASH_LIMITS = { ...DEFAULT_INGEST_LIMITS, rate: { ratePerSecond: 1_000_000, burst: 300 } };

/** A gateway that stores each message id once and lists the line numbers it holds, in order. */
class NumberingGateway {
  readonly byId = new Map<string, number[]>();
  receive(batch: CutBatch): void {
    if (this.byId.has(batch.messageId)) return;
    const numbers = LogBatch.decode(batch.entries).entries.flatMap((e) =>
      [
        ...Buffer.from(e.raw)
          .toString()
          .matchAll(/line-(\d+)/g),
      ].map((m) => Number(m[1])),
    );
    this.byId.set(batch.messageId, numbers);
  }
  lines(): number[] {
    return [...this.byId.values()].flat();
  }
}

interface CrashRun {
  /** Read lines up to (not including) this one; undefined: to the end, then stop cleanly. */
  readonly crashAt?: number;
  /** The periodic flush cuts the current batch after every `flushEvery` lines read. */
  readonly flushEvery: number;
  /** The joiner's idle flush fires after every `idleEvery` lines read. */
  readonly idleEvery: number;
  /** Of the batches cut in this run: how many reached the gateway, how many were released. */
  readonly delivered: number;
  readonly released: number;
  /** Whether the flush after the releases (checkpoints moved, intents forgotten) ran. */
  readonly settled: boolean;
}

/**
 * One run of the collector on the checkpoint file: reads, cuts, delivers, then crashes or stops.
 * The store stays open across runs (each scenario is its own instance): a crash leaves only what
 * was committed, and the next run's ContainerLog knows nothing else.
 */
function crashRun(
  store: CheckpointStore,
  instance: ContainerInstance,
  gateway: NumberingGateway,
  run: CrashRun,
): void {
  const log = new ContainerLog({
    instance,
    base,
    saved: store.load(instance),
    limits: CRASH_LIMITS,
    maxBatchEntries: 4,
    maxBatchBytes: 1 << 20,
    nowMs: 0,
    onDrop: () => undefined,
  });
  const after = log.resumeAfter();
  log.beginConnection();
  // The server returns everything from the checkpoint's second onwards.
  const from = after ? Math.max(0, (after.sec - 1_700_000_000) * 6) : 0;
  const until = run.crashAt ?? TOTAL;
  const cut: CutBatch[] = [];
  const flush = (cutPartial: boolean): void => {
    const batches = log.takeBatches(cutPartial);
    store.recordIntents(
      batches.map((b) => ({ instance, meta, intent: { messageId: b.messageId, end: b.end } })),
    );
    cut.push(...batches);
  };
  for (let n = from; n < until; n++) {
    const nowMs = 1_000 + n;
    log.accept(crashLogLine(n), false, nowMs);
    if ((n + 1) % run.idleEvery === 0) log.flushJoiner(nowMs + 2_000, true);
    if ((n + 1) % run.flushEvery === 0) flush(true);
    else if (log.hasFullBatch()) flush(false);
  }
  if (run.crashAt === undefined) {
    log.flushJoiner(1_000 + TOTAL, false);
    flush(true);
  }
  // The buffer is FIFO: the gateway got a prefix of the batches; a prefix (shorter or longer:
  // spilled to disk counts) was released; the rest died with the memory tier.
  const delivered = run.crashAt === undefined ? cut.length : run.delivered;
  const released = run.crashAt === undefined ? cut.length : run.released;
  cut.forEach((batch, i) => {
    if (i < delivered) gateway.receive(batch);
    if (i < released) log.markReleased(batch.messageId);
  });
  // Released but never delivered (on disk): the restarted buffer replays them.
  cut.slice(delivered, released).forEach((batch) => {
    gateway.receive(batch);
  });
  if (run.settled || run.crashAt === undefined) {
    const moved = log.settle();
    if (moved) store.advance([{ instance, meta, ...moved }]);
  }
}

describe('ContainerLog checkpoints', () => {
  it(
    'crashes at every line, twice, under shifting flush timing: every line at the gateway once, in order',
    { timeout: 60_000 },
    () => {
      const dir = mkdtempSync(join(tmpdir(), 'kubexa-ckpt-'));
      dirs.push(dir);
      const store = openCheckpointStore(join(dir, 'c.db'), () => 0);
      let scenario = 0;
      for (let first = 1; first < TOTAL; first++) {
        for (const flushEvery of [1, 2, 3, 5, 8]) {
          scenario++;
          const each = { ...instance, podUid: `uid-${String(scenario)}` };
          const gateway = new NumberingGateway();
          const second = Math.min(TOTAL - 1, first + 1 + ((first * 7) % 13));
          crashRun(store, each, gateway, {
            crashAt: first,
            flushEvery,
            idleEvery: 5,
            delivered: first % 3,
            released: first % 4,
            settled: first % 2 === 0,
          });
          // The restarted collector flushes on another rhythm: the replayed batches must still
          // come out whole, under their ids.
          crashRun(store, each, gateway, {
            crashAt: second,
            flushEvery: flushEvery + 1,
            idleEvery: 3,
            delivered: (first + flushEvery) % 3,
            released: (first + flushEvery) % 5,
            settled: flushEvery % 2 === 0,
          });
          crashRun(store, each, gateway, {
            flushEvery: 2,
            idleEvery: 7,
            delivered: 0,
            released: 0,
            settled: true,
          });
          expect(
            gateway.lines(),
            `crash at ${String(first)} and ${String(second)}, flush every ${String(flushEvery)}`,
          ).toEqual(EXPECTED);
        }
      }
      store.close();
      expect(scenario).toBe((TOTAL - 1) * 5);
    },
  );

  it('a replayed batch whose end line is gone ends at its recorded end, under its id; so does one the log ends before', () => {
    const dir = mkdtempSync(join(tmpdir(), 'kubexa-ckpt-'));
    dirs.push(dir);
    const store = openCheckpointStore(join(dir, 'c.db'), () => 0);
    const entries = (b: CutBatch | undefined): string[] =>
      b ? LogBatch.decode(b.entries).entries.map((e) => Buffer.from(e.raw).toString()) : [];
    // Run 1: lines 0..5 cut into A (0..3, full) and B (4..5); nothing released, then a crash.
    let log = open(store);
    log.beginConnection();
    for (let n = 0; n < 6; n++) log.accept(logLine(n), false, 0);
    log.flushJoiner(0, false);
    const [a, b] = log.takeBatches();
    if (!a || !b) throw new Error('run 1 cut fewer than two batches');
    store.recordIntents(
      [a, b].map((x) => ({ instance, meta, intent: { messageId: x.messageId, end: x.end } })),
    );
    // Run 2: the re-read lacks line 5, B's last line (rotated away): B ends before line 6.
    log = open(store);
    log.beginConnection();
    for (const n of [0, 1, 2, 3, 4, 6, 7]) log.accept(logLine(n), false, 0);
    const replay = log.takeBatches();
    expect(replay.map((x) => x.messageId).slice(0, 2)).toEqual([a.messageId, b.messageId]);
    expect(replay.map(entries)).toEqual([
      ['line-0', 'line-1', 'line-2', 'line-3'],
      ['line-4'],
      ['line-6'], // line 7 waits in the joiner for a continuation
    ]);
    // Run 3: the log ends after line 4 (a finished instance): B is cut at the end, under its id.
    log = open(store);
    log.beginConnection();
    for (let n = 0; n < 5; n++) log.accept(logLine(n), false, 0);
    expect(log.takeBatches().map((x) => x.messageId)).toEqual([a.messageId]);
    log.endOfLog(0);
    const ended = log.takeBatches();
    expect(ended.map((x) => x.messageId)).toEqual([b.messageId]);
    expect(entries(ended[0])).toEqual(['line-4']);
    store.close();
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
