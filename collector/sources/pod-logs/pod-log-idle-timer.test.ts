// An idle collector's CPU (issue #19): the source's flush timer ticks only while a tick has
// something to do, and sleeps otherwise, open streams or not. What creates work wakes it: lines
// read, a release of one of its batches, a container queued for a slot. Observed on the timers
// themselves (the flush interval is the only 7 ms interval the source creates) and on the flushes
// (every flush reports the lines read, 0 or more, to counters.linesRead).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { V1Pod } from '@kubernetes/client-node';
import { pino } from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  fakePodLogKube,
  followNamespaceProd,
  LINE_SECOND as SECOND,
  readCheckpoints,
  releaseFeed,
  timestampedLine,
} from '../../../test/helpers/pod-log-kube.js';
import { FakeClock } from '../../../test/helpers/fake-clock.js';
import { AgentMessage } from '../../../proto/index.js';
import type { BufferItem, ReleaseListener } from '../../buffer/types.js';
import { createPodLogSource, noopPodLogCounters, type PodLogSource } from './pod-log-source.js';

/** vi.waitFor's default 1 s is too short on a shared 2-core machine; nothing here is timed. */
const WAIT = { timeout: 10_000 };
const FLUSH_MS = 7;
/** Longer than any clock advance here: the idle watchdog never closes a stream. */
const STREAM_IDLE_MS = 3_600_000;
const SLICE_MS = 1_000;

const podNamed = (name: string, containers: string[]): V1Pod => ({
  metadata: { name, namespace: 'prod', uid: `uid-${name}` },
  spec: { nodeName: 'node-a', containers: containers.map((c) => ({ name: c })) },
  status: {
    phase: 'Running',
    containerStatuses: containers.map((c) => ({
      name: c,
      image: 'i',
      imageID: '',
      ready: true,
      restartCount: 0,
      state: { running: { startedAt: new Date(0) } },
    })),
  },
});

const line = timestampedLine;

const sources: PodLogSource[] = [];
const dirs: string[] = [];
afterEach(async () => {
  for (const s of sources.splice(0)) await s.close();
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  vi.restoreAllMocks();
});

/** Counts the flush interval's setInterval and clearInterval calls. */
function spyOnFlushTimer() {
  const timers = { armed: 0, cleared: 0 };
  const flushTimers = new Set<unknown>();
  const realSetInterval = globalThis.setInterval;
  const realClearInterval = globalThis.clearInterval;
  vi.spyOn(globalThis, 'setInterval').mockImplementation((callback: () => void, ms?: number) => {
    const timer = realSetInterval(callback, ms);
    if (ms === FLUSH_MS) {
      timers.armed++;
      flushTimers.add(timer);
    }
    return timer;
  });
  vi.spyOn(globalThis, 'clearInterval').mockImplementation(((timer?: NodeJS.Timeout) => {
    if (flushTimers.delete(timer)) timers.cleared++;
    realClearInterval(timer);
  }) as typeof clearInterval);
  return timers;
}

async function startSource(
  options: {
    pods?: V1Pod[];
    maxConcurrentStreams?: number;
    checkpointDir?: string;
    releases?: { onRelease(listener: ReleaseListener): () => void };
  } = {},
) {
  const timers = spyOnFlushTimer();
  const clock = new FakeClock();
  const { kube, opens, watchers } = fakePodLogKube(options.pods ?? []);
  const delivered: string[] = [];
  const sent: string[] = [];
  /** Flushes (each reports the lines read since the previous one) and what they reported. */
  const counted = { flushes: 0, lines: 0, bytes: 0 };
  const source = createPodLogSource(
    {
      logs: followNamespaceProd(options.checkpointDir ?? ''),
      identity: { clusterId: 'c', agentId: 'a' },
      flushIntervalMs: FLUSH_MS,
      streamIdleTimeoutMs: STREAM_IDLE_MS,
      fairnessSliceMs: SLICE_MS,
      ...(options.maxConcurrentStreams === undefined
        ? {}
        : { maxConcurrentStreams: options.maxConcurrentStreams }),
    },
    {
      logger: pino({ level: 'silent' }),
      clock,
      kube,
      sink: {
        enqueue: (item: BufferItem) => {
          sent.push(item.id);
          const message = AgentMessage.decode(item.payload);
          if (message.payload?.$case !== 'logs') return;
          for (const e of message.payload.value.entries) delivered.push(e.raw.toString());
        },
      },
      ...(options.releases === undefined ? {} : { releases: options.releases }),
      counters: {
        ...noopPodLogCounters,
        linesRead: (n) => {
          counted.flushes++;
          counted.lines += n;
        },
        bytesRead: (n) => {
          counted.bytes += n;
        },
      },
    },
  );
  sources.push(source);
  await source.start(new AbortController().signal);
  /**
   * The timer is not armed, and stays so (no flush) for ten of its intervals: nothing ticks
   * while nothing is pending. Fails if the timer runs.
   */
  const asleep = async (): Promise<void> => {
    await vi.waitFor(() => {
      expect(timers.armed).toBe(timers.cleared);
    }, WAIT);
    const flushes = counted.flushes;
    await new Promise((resolve) => setTimeout(resolve, FLUSH_MS * 10));
    expect(timers.armed).toBe(timers.cleared);
    expect(counted.flushes).toBe(flushes);
  };
  return { source, clock, opens, watchers, delivered, sent, counted, timers, asleep };
}

describe('pod log flush timer', () => {
  it('sleeps with no pod to follow, and with open streams that read nothing', async () => {
    const { timers, watchers, opens, source, asleep } = await startSource();
    // No pod: armed once at start, then asleep after its first tick.
    await vi.waitFor(() => {
      expect(timers).toEqual({ armed: 1, cleared: 1 });
    }, WAIT);
    await asleep();
    // Three streams open and read nothing: the timer stays asleep, no flush walks the logs.
    await vi.waitFor(() => {
      expect(watchers.length).toBeGreaterThan(0);
    }, WAIT);
    for (const onEvent of watchers) onEvent('ADDED', podNamed('web-1', ['a', 'b', 'c']));
    await vi.waitFor(() => {
      expect(opens).toHaveLength(3);
    }, WAIT);
    expect(source.stats().activeStreams).toBe(3);
    await asleep();
    expect(timers).toEqual({ armed: 1, cleared: 1 });
  });

  it('wakes on lines read, and sleeps again once they went out', async () => {
    const { opens, delivered, counted, clock, timers, asleep } = await startSource({
      pods: [podNamed('web-1', ['a', 'b'])],
    });
    await vi.waitFor(() => {
      expect(opens).toHaveLength(2);
    }, WAIT);
    await asleep();
    opens[0]?.body.write(line(1, 'x'));
    await vi.waitFor(() => {
      expect(counted.lines).toBe(1);
    }, WAIT);
    clock.advance(2_500);
    await vi.waitFor(() => {
      expect(delivered).toEqual(['x']);
    }, WAIT);
    await asleep();
    expect(timers.armed).toBe(2);
  });

  it('sends a partial batch read after a quiet period without more lines, and reports the reads', async () => {
    const { opens, delivered, counted, asleep } = await startSource({
      pods: [podNamed('web-1', ['a'])],
    });
    await vi.waitFor(() => {
      expect(opens).toHaveLength(1);
    }, WAIT);
    await asleep();
    // `a` is a whole record in the partial batch (`b` started the next one, which the joiner
    // holds): the next tick cuts the batch, the clock never moves.
    const chunk = line(1, 'a') + line(2, 'b');
    opens[0]?.body.write(chunk);
    await vi.waitFor(() => {
      expect(delivered).toEqual(['a']);
    }, WAIT);
    expect(counted).toMatchObject({ lines: 2, bytes: Buffer.byteLength(chunk) });
  });

  it('keeps ticking while the joiner holds a record, and emits it after the hold time', async () => {
    const { opens, delivered, counted, clock, timers, asleep } = await startSource({
      pods: [podNamed('web-1', ['a'])],
    });
    await vi.waitFor(() => {
      expect(opens).toHaveLength(1);
    }, WAIT);
    await asleep();
    opens[0]?.body.write(line(1, 'held'));
    // The tick that reported the line found the record held: the timer stays armed.
    await vi.waitFor(() => {
      expect(counted.lines).toBe(1);
    }, WAIT);
    const flushes = counted.flushes;
    await vi.waitFor(() => {
      expect(counted.flushes).toBeGreaterThan(flushes + 2);
    }, WAIT);
    expect(timers.armed - timers.cleared).toBe(1);
    expect(delivered).toEqual([]);
    // The joiner's hold time (2 s of the clock) passes with no further line.
    clock.advance(2_500);
    await vi.waitFor(() => {
      expect(delivered).toEqual(['held']);
    }, WAIT);
    await asleep();
  });

  it('moves the checkpoint on a release that arrives while it sleeps', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kubexa-idle-release-'));
    dirs.push(dir);
    const { listeners, releases } = releaseFeed();
    const checkpoint = (): unknown => readCheckpoints(dir);
    const { opens, delivered, sent, counted, clock, timers, source, asleep } = await startSource({
      pods: [podNamed('web-1', ['a'])],
      checkpointDir: dir,
      releases,
    });
    await vi.waitFor(() => {
      expect(opens).toHaveLength(1);
    }, WAIT);
    opens[0]?.body.write(line(1, 'a'));
    await vi.waitFor(() => {
      expect(counted.lines).toBe(1);
    }, WAIT);
    clock.advance(2_500);
    await vi.waitFor(() => {
      expect(delivered).toEqual(['a']);
    }, WAIT);
    // Enqueued, not released: nothing for a tick to do, the timer sleeps.
    await asleep();
    expect(source.stats().unreleasedBatches).toBe(1);
    expect(checkpoint()).toEqual([]);
    // Another source's id wakes nothing; ours moves the checkpoint, with no line read.
    const armed = timers.armed;
    for (const listener of listeners) listener(['not-ours']);
    await asleep();
    expect(timers.armed).toBe(armed);
    for (const listener of listeners) listener([sent[0] ?? '']);
    const secondOfLine = Date.parse(`${SECOND}Z`) / 1000;
    await vi.waitFor(() => {
      expect(checkpoint()).toEqual([{ sec: secondOfLine, nanos: 1, count: 1 }]);
    }, WAIT);
    expect(source.stats().unreleasedBatches).toBe(0);
    await asleep();
  });

  it('rebalances while a container waits for a slot, though no stream reads anything', async () => {
    const { opens, watchers, counted, clock, source, asleep } = await startSource({
      pods: [podNamed('web-1', ['a'])],
      maxConcurrentStreams: 1,
    });
    await vi.waitFor(() => {
      expect(opens).toHaveLength(1);
    }, WAIT);
    await asleep();
    // A second pod: its container waits for the only slot, and the timer wakes for it.
    for (const onEvent of watchers) onEvent('ADDED', podNamed('web-2', ['a']));
    await vi.waitFor(() => {
      expect(source.stats().queuedContainers).toBe(1);
    }, WAIT);
    // A tick after the queue formed (the slice not yet over): the timer must keep ticking.
    const flushes = counted.flushes;
    await vi.waitFor(() => {
      expect(counted.flushes).toBeGreaterThan(flushes);
    }, WAIT);
    // The slice ends: web-1 yields its slot to web-2, then web-2 to web-1, and so on.
    clock.advance(SLICE_MS);
    await vi.waitFor(() => {
      expect(opens.map((o) => o.request.pod)).toEqual(['web-1', 'web-2']);
    }, WAIT);
    const rotated = counted.flushes;
    await vi.waitFor(() => {
      expect(counted.flushes).toBeGreaterThan(rotated);
    }, WAIT);
    clock.advance(SLICE_MS);
    await vi.waitFor(() => {
      expect(opens.map((o) => o.request.pod)).toEqual(['web-1', 'web-2', 'web-1']);
    }, WAIT);
    expect(source.stats()).toMatchObject({ activeStreams: 1, queuedContainers: 1 });
  });
});
