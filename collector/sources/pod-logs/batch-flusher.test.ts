// The flusher on its own: intents recorded before the enqueue, ids found again at release, the
// checkpoint moved only over released batches (or at once without a release feed), the message
// stamped with its first line's time, and how `ready` and `all` requests are coalesced. (Each
// test ends a record with flushJoiner, as a connection's end does.)
import type { V1Pod } from '@kubernetes/client-node';
import { pino } from 'pino';
import { describe, expect, it, vi } from 'vitest';
import { FakeClock } from '../../../test/helpers/fake-clock.js';
import { AgentMessage } from '../../../proto/index.js';
import type { BufferItem } from '../../buffer/types.js';
import { BatchFlusher, READY_FLUSH_DELAY_MS } from './batch-flusher.js';
import { memoryOnlyCheckpoints, type CheckpointStore } from './checkpoint-store.js';
import { DEFAULT_INGEST_LIMITS } from './container-log.js';
import { LogRegistry } from './log-registry.js';

const WAIT = { timeout: 10_000 };
const pod: V1Pod = { metadata: { name: 'web-1', namespace: 'prod', uid: 'uid-1' } };
const line = (nanos: number): string => `2025-03-01T10:00:07.${String(nanos).padStart(9, '0')}Z x`;

function setUp(releaseFeed: boolean) {
  const clock = new FakeClock();
  const calls: string[] = [];
  const advanced: unknown[] = [];
  const store: CheckpointStore = {
    ...memoryOnlyCheckpoints,
    recordIntents: (entries) => calls.push(`intents ${String(entries.length)}`),
    advance: (moves) => {
      advanced.push(...moves.map((m) => m.position));
    },
  };
  const registry = new LogRegistry({
    clock,
    store: () => store,
    limits: () => DEFAULT_INGEST_LIMITS,
    maxBatchEntries: 2,
    maxBatchBytes: 1 << 20,
    workloadOf: () => undefined,
    dropped: () => undefined,
    truncated: () => undefined,
  });
  const sent: BufferItem[] = [];
  const counted = { lines: 0, bytes: 0 };
  const flusher = new BatchFlusher({
    logger: pino({ level: 'silent' }),
    clock,
    sink: {
      enqueue: (item) => {
        calls.push(`enqueue ${item.id}`);
        sent.push(item);
      },
    },
    registry,
    store: () => store,
    identity: { clusterId: 'c', agentId: 'a' },
    releaseFeed,
    linesRead: (n) => (counted.lines += n),
    bytesRead: (n) => (counted.bytes += n),
  });
  const { tracked } = registry.open(pod, 'app', 0);
  return { clock, calls, advanced, registry, sent, counted, flusher, log: tracked.log };
}

describe('BatchFlusher', () => {
  it('records intents before it enqueues, and moves the checkpoint only over released batches', () => {
    const { calls, advanced, registry, sent, flusher, log } = setUp(true);
    log.accept(line(1), false, 0);
    log.accept(line(2), false, 0);
    log.flushJoiner(0, false);
    flusher.flush('all');
    expect(calls).toEqual(['intents 1', `enqueue ${sent[0]?.id ?? ''}`]);
    expect(advanced).toEqual([]);
    registry.release([sent[0]?.id ?? '']);
    flusher.flush('idle');
    expect(advanced).toMatchObject([{ sec: 1740823207, nanos: 2 }]);
  });

  it('without a release feed, counts an enqueued batch as released', () => {
    const { advanced, flusher, log } = setUp(false);
    log.accept(line(1), false, 0);
    log.flushJoiner(0, false);
    flusher.flush('all');
    expect(advanced).toMatchObject([{ sec: 1740823207, nanos: 1 }]);
  });

  it("stamps the message with its first line's time, not the flush time", () => {
    const { clock, sent, flusher, log } = setUp(false);
    log.accept(line(5), false, 0);
    log.accept('2025-03-01T10:00:09.000000000Z later', false, 0);
    log.flushJoiner(0, false);
    clock.advance(60_000);
    flusher.flush('all');
    const stamps = sent.map((item) => AgentMessage.decode(item.payload).meta?.timestamp);
    expect(stamps).toEqual(['1740823207000']);
  });

  it('takes only full batches on `ready`, every batch on `all`', () => {
    const { sent, flusher, log } = setUp(false);
    for (let n = 1; n <= 3; n++) log.accept(line(n), false, 0);
    log.flushJoiner(0, false);
    flusher.flush('ready');
    expect(sent).toHaveLength(1);
    flusher.flush('all');
    expect(sent).toHaveLength(2);
  });

  it('counts the lines and bytes read since the last flush, at the flush', () => {
    const { counted, flusher } = setUp(false);
    expect(flusher.hasPending()).toBe(false);
    flusher.countRead(3, 120);
    flusher.countRead(1, 40);
    expect(counted).toEqual({ lines: 0, bytes: 0 });
    expect(flusher.hasPending()).toBe(true);
    flusher.flush('idle');
    expect(counted).toEqual({ lines: 4, bytes: 160 });
    expect(flusher.hasPending()).toBe(false);
    flusher.flush('idle');
    expect(counted).toEqual({ lines: 4, bytes: 160 });
    // Bytes without a whole line (a line split across chunks) are counted at a flush too.
    flusher.countRead(0, 7);
    expect(flusher.hasPending()).toBe(true);
    flusher.flush('idle');
    expect(counted).toEqual({ lines: 4, bytes: 167 });
    expect(flusher.hasPending()).toBe(false);
  });

  it('coalesces requests into one flush, and flushes nothing after close', async () => {
    const { sent, flusher, log } = setUp(false);
    const flush = vi.spyOn(flusher, 'flush');
    log.accept(line(1), false, 0);
    log.flushJoiner(0, false);
    flusher.request('ready');
    flusher.request('ready');
    flusher.request('all');
    flusher.request('all');
    await vi.waitFor(() => {
      expect(flush).toHaveBeenCalled();
    }, WAIT);
    // The `ready` timer was dropped by the `all` request: no second flush comes.
    await new Promise((resolve) => setTimeout(resolve, READY_FLUSH_DELAY_MS * 3));
    expect(flush.mock.calls).toEqual([['all']]);
    expect(sent).toHaveLength(1);
    log.accept(line(2), false, 0);
    log.flushJoiner(0, false);
    flusher.request('ready');
    flusher.close();
    flusher.request('all');
    await new Promise((resolve) => setTimeout(resolve, READY_FLUSH_DELAY_MS * 3));
    expect(flush.mock.calls).toEqual([['all'], ['all']]);
    expect(sent).toHaveLength(2);
  });
});
