// The source's reconnect paths against a fake API server: an idle stream is closed by the
// watchdog and reopened from its position; a stream cut after it delivered lines resumes at once,
// dropping the fragment of a line that the cut split. Neither loses nor repeats a line. A
// container restart finishes the previous instance, and tells a stream that misread the new
// instance under the previous one's identity.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { V1Pod } from '@kubernetes/client-node';
import Database from 'better-sqlite3';
import { pino, type Logger } from 'pino';
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
import type { BufferItem } from '../../buffer/types.js';
import {
  createPodLogSource,
  noopPodLogCounters,
  type PodLogSource,
  type PodLogSourceDeps,
} from './pod-log-source.js';
import { drainEventLoop } from '../../../test/helpers/wait.js';

/** vi.waitFor's default 1 s is too short on a shared 2-core machine; nothing here is timed. */
const WAIT = { timeout: 10_000 };

const logger = pino({ level: 'silent' });
const IDLE_MS = 10_000;

const pod: V1Pod = {
  metadata: { name: 'web-1', namespace: 'prod', uid: 'uid-1' },
  spec: { nodeName: 'node-a', containers: [{ name: 'app' }] },
  status: {
    phase: 'Running',
    containerStatuses: [
      {
        name: 'app',
        image: 'i',
        imageID: '',
        ready: true,
        restartCount: 0,
        state: { running: { startedAt: new Date(0) } },
      },
    ],
  },
};

/** One pod; every log request opens a body the test writes to, ended on the request's abort. */
const fakeKube = () => fakePodLogKube([pod]);

const line = timestampedLine;

const sources: PodLogSource[] = [];
const dirs: string[] = [];
afterEach(async () => {
  for (const s of sources.splice(0)) await s.close();
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

async function started(
  checkpointDir = '',
  releases?: PodLogSourceDeps['releases'],
  sourceLogger: Logger = logger,
) {
  const clock = new FakeClock();
  const { kube, opens, watchers } = fakeKube();
  const delivered: string[] = [];
  /** The ids of the items enqueued, in order, and their AgentMetadata.timestamp. */
  const sent: string[] = [];
  const sentTimes: string[] = [];
  const counted = { reconnects: 0, lines: 0, errors: [] as string[], backoffs: [] as string[] };
  const source = createPodLogSource(
    {
      logs: followNamespaceProd(checkpointDir),
      identity: { clusterId: 'c', agentId: 'a' },
      streamIdleTimeoutMs: IDLE_MS,
      flushIntervalMs: 10,
    },
    {
      logger: sourceLogger,
      clock,
      kube,
      sink: {
        enqueue: (item: BufferItem) => {
          sent.push(item.id);
          const message = AgentMessage.decode(item.payload);
          sentTimes.push(message.meta?.timestamp ?? '');
          if (message.payload?.$case !== 'logs') return;
          for (const e of message.payload.value.entries) delivered.push(e.raw.toString());
        },
      },
      ...(releases === undefined ? {} : { releases }),
      counters: {
        ...noopPodLogCounters,
        linesRead: (n) => {
          counted.lines += n;
        },
        reconnects: (n) => {
          counted.reconnects += n;
        },
        streamErrors: (kind) => {
          counted.errors.push(kind);
        },
        streamBackoffs: (state) => {
          counted.backoffs.push(state);
        },
      },
    },
  );
  sources.push(source);
  await source.start(new AbortController().signal);
  await vi.waitFor(() => {
    expect(opens).toHaveLength(1);
  }, WAIT);
  return { clock, opens, delivered, counted, watchers, sent, sentTimes, source };
}

/** Backoff sleeps: anything the clock was asked to sleep that is not the watchdog's. */
const backoffs = (clock: FakeClock): number[] => clock.sleeps.filter((ms) => ms > IDLE_MS);

describe('pod log source reconnects', () => {
  it('closes a stream idle for streamIdleTimeoutMs and resumes from its position', async () => {
    const { clock, opens, delivered, counted } = await started();
    const first = opens[0];
    expect(first?.request).toMatchObject({ follow: true, tailLines: 10 });
    first?.body.write(line(1, 'a') + line(2, 'b') + line(2, 'c'));
    // The joiner holds the last record until the next line or 2 s (of the clock) of quiet.
    await vi.waitFor(() => {
      expect(delivered).toEqual(['a', 'b']);
    }, WAIT);
    clock.advance(2_500);
    await vi.waitFor(() => {
      expect(delivered).toEqual(['a', 'b', 'c']);
    }, WAIT);
    // Bytes keep the stream open: a line at 6 s, then 8.5 s of silence is not 10 s of it.
    clock.advance(3_500);
    first?.body.write(line(3, 'd'));
    await vi.waitFor(() => {
      expect(counted.lines).toBe(4);
    }, WAIT);
    clock.advance(2_500);
    await vi.waitFor(() => {
      expect(delivered).toHaveLength(4);
    }, WAIT);
    clock.advance(6_000);
    await drainEventLoop();
    expect(opens).toHaveLength(1);
    expect(first?.signal.aborted).toBe(false);
    // Ten seconds after the last byte, the watchdog closes it; the reconnect asks from the
    // position's second and skips what was read.
    clock.advance(1_500);
    await vi.waitFor(() => {
      expect(opens).toHaveLength(2);
    }, WAIT);
    expect(first?.signal.aborted).toBe(true);
    const second = opens[1];
    expect(second?.request.tailLines).toBeUndefined();
    expect(second?.request.sinceTime?.toISOString()).toBe(`${SECOND}.000Z`);
    second?.body.write(line(1, 'a') + line(2, 'b') + line(2, 'c') + line(3, 'd') + line(3, 'e'));
    await vi.waitFor(() => {
      expect(counted.lines).toBe(9);
    }, WAIT);
    clock.advance(2_500);
    await vi.waitFor(() => {
      expect(delivered).toEqual(['a', 'b', 'c', 'd', 'e']);
    }, WAIT);
    expect(backoffs(clock)).toEqual([]);
    expect(counted.reconnects).toBe(1);
    expect(counted.errors).toEqual([]);
  });

  it('resumes a stream cut mid-line at once, without the fragment, with no loss or duplicate', async () => {
    const { clock, opens, delivered, counted } = await started();
    const first = opens[0];
    first?.body.write(line(1, 'a') + line(2, 'b') + line(2, 'c').slice(0, 20));
    await vi.waitFor(() => {
      expect(delivered).toEqual(['a']);
    }, WAIT);
    first?.body.destroy(Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' }));
    await vi.waitFor(() => {
      expect(opens).toHaveLength(2);
    }, WAIT);
    const second = opens[1];
    expect(second?.request.sinceTime?.toISOString()).toBe(`${SECOND}.000Z`);
    second?.body.write(line(1, 'a') + line(2, 'b') + line(2, 'c') + line(4, 'd'));
    await vi.waitFor(() => {
      expect(counted.lines).toBe(6);
    }, WAIT);
    clock.advance(2_500);
    await vi.waitFor(() => {
      expect(delivered).toEqual(['a', 'b', 'c', 'd']);
    }, WAIT);
    expect(backoffs(clock)).toEqual([]);
    expect(counted.errors).toEqual(['cut']);
    expect(counted.reconnects).toBe(1);
  });

  it('drops the unterminated fragment of a connection it closed itself, and reads the whole line on the next', async () => {
    const { clock, opens, delivered, counted } = await started();
    const first = opens[0];
    // 'bravo' is cut after its timestamp: a fragment with a position of its own.
    first?.body.write(line(1, 'alpha') + line(2, 'bravo').slice(0, -3));
    await vi.waitFor(() => {
      expect(counted.lines).toBe(1);
    }, WAIT);
    clock.advance(IDLE_MS);
    await vi.waitFor(() => {
      expect(opens).toHaveLength(2);
    }, WAIT);
    expect(first?.signal.aborted).toBe(true);
    opens[1]?.body.write(line(1, 'alpha') + line(2, 'bravo') + line(3, 'charlie'));
    await vi.waitFor(() => {
      expect(counted.lines).toBe(4);
    }, WAIT);
    clock.advance(2_500);
    await vi.waitFor(() => {
      expect(delivered).toEqual(['alpha', 'bravo', 'charlie']);
    }, WAIT);
  });

  it('backs off a request that fails before any line', async () => {
    const { clock, opens, counted } = await started();
    opens[0]?.body.destroy(Object.assign(new Error('boom'), { code: 500 }));
    await clock.waitForSleep((ms) => ms < IDLE_MS);
    expect(opens).toHaveLength(1);
    expect(counted.errors).toEqual(['500']);
  });
});

describe('pod log source, a stream ended with nothing new (issue #9)', () => {
  it('backs off a follow stream the server ends after sending only lines already read, logging once per state', async () => {
    const logged: string[] = [];
    const capture = pino({ level: 'info' }, { write: (text: string) => logged.push(text) });
    const quietLines = () => logged.filter((l) => l.includes('ended with nothing new'));
    const { clock, opens, delivered, counted } = await started('', undefined, capture);
    opens[0]?.body.end(line(1, 'a') + line(2, 'b'));
    // New lines, then the end (a kubelet rotation, or the container just stopped): at once.
    await vi.waitFor(() => {
      expect(opens).toHaveLength(2);
    }, WAIT);
    // The kubelet of a container that is not running: the same lines again, then the end.
    for (let round = 0; round < 3; round++) {
      opens[round + 1]?.body.end(line(1, 'a') + line(2, 'b'));
      const backoff = await clock.waitForSleep((ms) => ms < IDLE_MS);
      expect(backoff).toBeGreaterThanOrEqual(800 * 2 ** round);
      expect(backoff).toBeLessThanOrEqual(1_200 * 2 ** round);
      expect(opens).toHaveLength(round + 2);
      clock.advance(backoff);
      await vi.waitFor(() => {
        expect(opens).toHaveLength(round + 3);
      }, WAIT);
    }
    expect(counted.backoffs).toEqual(['running', 'running', 'running']);
    expect(quietLines()).toHaveLength(1);
    expect(quietLines()[0]).toContain('"reason":"ended, container running"');
    // New lines again: reconnects at once, and says so once.
    opens[4]?.body.end(line(1, 'a') + line(2, 'b') + line(3, 'c'));
    await vi.waitFor(() => {
      expect(opens).toHaveLength(6);
    }, WAIT);
    expect(logged.filter((l) => l.includes('delivering new lines again'))).toHaveLength(1);
    expect(counted.backoffs).toHaveLength(3);
    expect(delivered).toEqual(['a', 'b', 'c']);
  });
});

/** The pod after its container restarted `restartCount` times. */
function restarted(
  restartCount: number,
  times: { finishedAt?: Date; startedAt?: Date } = {},
): V1Pod {
  const next = structuredClone(pod);
  const status = next.status?.containerStatuses?.[0];
  if (!status) throw new Error('no status');
  status.restartCount = restartCount;
  if (times.startedAt) status.state = { running: { startedAt: times.startedAt } };
  if (times.finishedAt) {
    status.lastState = {
      terminated: { exitCode: 0, startedAt: new Date(0), finishedAt: times.finishedAt },
    };
  }
  return next;
}

/** A checkpoint directory removed after the test. */
function checkpointDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'kubexa-source-'));
  dirs.push(dir);
  return dir;
}

/** The stored checkpoint position of one instance of the test pod's container. */
function storedPosition(dir: string, restartCount: number) {
  const db = new Database(join(dir, 'pod-logs.db'), { readonly: true });
  try {
    return db
      .prepare<[number], { sec: number; nanos: number; count: number }>(
        'SELECT sec, nanos, count FROM checkpoints WHERE restart_count = ?',
      )
      .get(restartCount);
  } finally {
    db.close();
  }
}

/**
 * Instance 0's stream reads 1..3 and ends (its container stopped); the reconnect, opened before
 * the watch reports the restart, is served the new instance's A, B, C. Returns once they went out
 * under instance 0.
 */
async function misreadNewInstance(setup: Awaited<ReturnType<typeof started>>): Promise<void> {
  const { opens, delivered } = setup;
  opens[0]?.body.end(line(1, '1') + line(2, '2') + line(3, '3'));
  await vi.waitFor(() => {
    expect(opens).toHaveLength(2);
  }, WAIT);
  // The log API names no instance: the reconnect asks from the second of line 3, and the kubelet
  // serves the running container, instance 1.
  expect(opens[1]?.request.previous).toBeUndefined();
  expect(opens[1]?.request.sinceTime?.toISOString()).toBe(`${SECOND}.000Z`);
  opens[1]?.body.write(line(10, 'A') + line(11, 'B') + line(12, 'C'));
  await vi.waitFor(() => {
    expect(delivered).toEqual(['1', '2', '3', 'A', 'B']);
  }, WAIT);
}

describe('pod log source messages', () => {
  it("stamps a log message with its first line's time, not the flush time", async () => {
    const { clock, opens, sentTimes, counted } = await started();
    opens[0]?.body.write(line(7_000_000, 'a') + line(9_000_000, 'b'));
    await vi.waitFor(() => {
      expect(counted.lines).toBe(2);
    }, WAIT);
    clock.advance(2_500);
    await vi.waitFor(() => {
      expect(sentTimes.length).toBeGreaterThan(0);
    }, WAIT);
    expect(sentTimes[0]).toBe(String(Date.parse(`${SECOND}Z`) + 7));
    expect(clock.now()).not.toBe(Date.parse(`${SECOND}Z`) + 7);
  });
});

describe('pod log source checkpoints', () => {
  it('moves the checkpoint only over batches the buffer released, not over what it enqueued', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kubexa-source-release-'));
    dirs.push(dir);
    const { listeners, releases } = releaseFeed();
    const checkpoint = (): unknown => readCheckpoints(dir);
    const { clock, opens, delivered, sent, counted } = await started(dir, releases);
    opens[0]?.body.write(line(1, 'a') + line(2, 'b'));
    await vi.waitFor(() => {
      expect(counted.lines).toBe(2);
    }, WAIT);
    clock.advance(2_500);
    await vi.waitFor(() => {
      expect(delivered).toEqual(['a', 'b']);
    }, WAIT);
    // Flushes run every 10 ms: give them time to (wrongly) move the checkpoint.
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(checkpoint()).toEqual([]);
    // The buffer releases the first batch: the next flush moves the checkpoint to its end.
    const [firstId] = sent;
    for (const listener of listeners) listener([firstId ?? '']);
    const secondOfLine = Date.parse(`${SECOND}Z`) / 1000;
    await vi.waitFor(() => {
      expect(checkpoint()).toEqual([
        { sec: secondOfLine, nanos: sent.length > 1 ? 1 : 2, count: 1 },
      ]);
    }, WAIT);
  });
});

describe('pod log source restarts', () => {
  it('finishes the previous instance with previous=true, then reads the new one from its start', async () => {
    const { clock, opens, delivered, counted, watchers } = await started();
    opens[0]?.body.write(line(1, 'a') + line(2, 'b') + line(2, 'c'));
    await vi.waitFor(() => {
      expect(delivered).toEqual(['a', 'b']);
    }, WAIT);
    clock.advance(2_500);
    await vi.waitFor(() => {
      expect(delivered).toEqual(['a', 'b', 'c']);
    }, WAIT);
    await vi.waitFor(() => {
      expect(watchers).toHaveLength(1);
    }, WAIT);
    // The watch reports the restart; the follow stream of instance 0 is still open.
    watchers[0]?.('MODIFIED', restarted(1));
    await vi.waitFor(() => {
      expect(opens).toHaveLength(2);
    }, WAIT);
    expect(opens[0]?.signal.aborted).toBe(true);
    const previous = opens[1];
    expect(previous?.request).toMatchObject({ follow: false, previous: true });
    expect(previous?.request.tailLines).toBeUndefined();
    expect(previous?.request.sinceTime?.toISOString()).toBe(`${SECOND}.000Z`);
    // From the position's second: what was read is skipped, the rest is delivered.
    previous?.body.end(line(1, 'a') + line(2, 'b') + line(2, 'c') + line(3, 'd') + line(4, 'e'));
    await vi.waitFor(() => {
      expect(opens).toHaveLength(3);
    }, WAIT);
    await vi.waitFor(() => {
      expect(delivered).toEqual(['a', 'b', 'c', 'd', 'e']);
    }, WAIT);
    const current = opens[2];
    expect(current?.request).toMatchObject({ follow: true });
    expect(current?.request.previous).toBeUndefined();
    expect(current?.request.tailLines).toBeUndefined();
    expect(current?.request.sinceTime).toBeUndefined();
    current?.body.write(line(1, 'A') + line(9, 'B') + line(9, 'C'));
    await vi.waitFor(() => {
      expect(delivered).toHaveLength(7);
    }, WAIT);
    clock.advance(2_500);
    await vi.waitFor(() => {
      expect(delivered).toEqual(['a', 'b', 'c', 'd', 'e', 'A', 'B', 'C']);
    }, WAIT);
    // No misread (the previous read saw its position): one previous read, no skip in instance 1.
    expect(opens.filter((o) => o.request.previous === true)).toHaveLength(1);
    // Read to its end: a later restart or reconnect of the stream does not read it again.
    current?.body.end();
    await vi.waitFor(() => {
      expect(opens).toHaveLength(4);
    }, WAIT);
    expect(opens[3]?.request.previous).toBeUndefined();
    expect(opens[3]?.request.sinceTime?.toISOString()).toBe(`${SECOND}.000Z`);
    expect(counted.errors).toEqual([]);
  });

  it('leaves the stream open on a status update with the same restart count', async () => {
    const { opens, watchers } = await started();
    expect(opens[0]?.request.previous).toBeUndefined();
    await vi.waitFor(() => {
      expect(watchers).toHaveLength(1);
    }, WAIT);
    // The same restart count again: no restart, the stream stays open.
    watchers[0]?.('MODIFIED', restarted(0));
    await drainEventLoop();
    expect(opens).toHaveLength(1);
    expect(opens[0]?.signal.aborted).toBe(false);
  });
});

describe('pod log source, a stream that misread the new instance (issue #5)', () => {
  it('skips in the new instance what went out under the previous one, and reads the previous one where the misread began', async () => {
    const dir = checkpointDir();
    const setup = await started(dir);
    const { clock, opens, delivered, counted, watchers } = setup;
    await misreadNewInstance(setup);
    await vi.waitFor(() => {
      expect(watchers).toHaveLength(1);
    }, WAIT);
    watchers[0]?.('MODIFIED', restarted(1));
    await vi.waitFor(() => {
      expect(opens).toHaveLength(3);
    }, WAIT);
    // The restart closed the misreading stream; C, held by the joiner, went out with it.
    expect(opens[1]?.signal.aborted).toBe(true);
    expect(delivered).toEqual(['1', '2', '3', 'A', 'B', 'C']);
    // Instance 0 from its position, the second of C. Its log ends at 4, before C: what went out
    // after 3 was instance 1's.
    const previous = opens[2];
    expect(previous?.request).toMatchObject({ follow: false, previous: true });
    expect(previous?.request.sinceTime?.toISOString()).toBe(`${SECOND}.000Z`);
    previous?.body.end(line(1, '1') + line(2, '2') + line(3, '3') + line(4, '4'));
    // Read again from where the misreading connection began (after 3): 4 went out nowhere.
    await vi.waitFor(() => {
      expect(opens).toHaveLength(4);
    }, WAIT);
    const again = opens[3];
    expect(again?.request).toMatchObject({ follow: false, previous: true });
    expect(again?.request.sinceTime?.toISOString()).toBe(`${SECOND}.000Z`);
    // Instance 1's skip is stored before that read: C's position.
    expect(storedPosition(dir, 1)).toEqual({ sec: 1740823207, nanos: 12, count: 1 });
    again?.body.end(line(1, '1') + line(2, '2') + line(3, '3') + line(4, '4'));
    await vi.waitFor(() => {
      expect(opens).toHaveLength(5);
    }, WAIT);
    // Instance 1 resumes after C, as it would from its checkpoint after a restart of the collector.
    const current = opens[4];
    expect(current?.request).toMatchObject({ follow: true });
    expect(current?.request.previous).toBeUndefined();
    expect(current?.request.tailLines).toBeUndefined();
    expect(current?.request.sinceTime?.toISOString()).toBe(`${SECOND}.000Z`);
    current?.body.write(line(10, 'A') + line(11, 'B') + line(12, 'C') + line(13, 'D'));
    await vi.waitFor(() => {
      expect(counted.lines).toBe(3 + 3 + 4 + 4 + 4);
    }, WAIT);
    clock.advance(2_500);
    // Delivery order: instance 0's stream (1..3), then the misread (A..C), then instance 0's
    // end read again from 3 (4), then instance 1 after C (D). Each exactly once.
    await vi.waitFor(() => {
      expect(delivered).toEqual(['1', '2', '3', 'A', 'B', 'C', '4', 'D']);
    }, WAIT);
    expect(opens.filter((o) => o.request.previous === true)).toHaveLength(2);
    expect(counted.errors).toEqual([]);
  });

  it('without a previous log (400), tells the misread by the pod status times', async () => {
    const setup = await started();
    const { clock, opens, delivered, counted, watchers } = setup;
    await misreadNewInstance(setup);
    await vi.waitFor(() => {
      expect(watchers).toHaveLength(1);
    }, WAIT);
    // Instance 0 finished in the second before instance 1 started; C is in the start second.
    watchers[0]?.(
      'MODIFIED',
      restarted(1, {
        finishedAt: new Date('2025-03-01T10:00:06.500Z'),
        startedAt: new Date(`${SECOND}.000Z`),
      }),
    );
    await vi.waitFor(() => {
      expect(opens).toHaveLength(3);
    }, WAIT);
    expect(opens[2]?.request.previous).toBe(true);
    opens[2]?.body.destroy(
      Object.assign(new Error('previous terminated container'), { code: 400 }),
    );
    await vi.waitFor(() => {
      expect(opens).toHaveLength(4);
    }, WAIT);
    const current = opens[3];
    expect(current?.request.previous).toBeUndefined();
    expect(current?.request.sinceTime?.toISOString()).toBe(`${SECOND}.000Z`);
    current?.body.write(line(10, 'A') + line(11, 'B') + line(12, 'C') + line(13, 'D'));
    await vi.waitFor(() => {
      expect(counted.lines).toBe(3 + 3 + 4);
    }, WAIT);
    clock.advance(2_500);
    await vi.waitFor(() => {
      expect(delivered).toEqual(['1', '2', '3', 'A', 'B', 'C', 'D']);
    }, WAIT);
  });

  it('in the same second as the previous finish, keeps reading the new instance from its start', async () => {
    const setup = await started();
    const { opens, watchers } = setup;
    await misreadNewInstance(setup);
    await vi.waitFor(() => {
      expect(watchers).toHaveLength(1);
    }, WAIT);
    // Finished and started in C's second: C may be either's, so nothing is skipped.
    watchers[0]?.(
      'MODIFIED',
      restarted(1, {
        finishedAt: new Date(`${SECOND}.000Z`),
        startedAt: new Date(`${SECOND}.000Z`),
      }),
    );
    await vi.waitFor(() => {
      expect(opens).toHaveLength(3);
    }, WAIT);
    opens[2]?.body.destroy(
      Object.assign(new Error('previous terminated container'), { code: 400 }),
    );
    await vi.waitFor(() => {
      expect(opens).toHaveLength(4);
    }, WAIT);
    expect(opens[3]?.request.previous).toBeUndefined();
    expect(opens[3]?.request.sinceTime).toBeUndefined();
  });
});
