// The idle collection on a fake clock with scripted heap and event-loop readings: it collects
// (twice in a row) only once the heap grew by the threshold since the last collection AND the
// event loop has been idle for the whole idle period; a busy interval starts the idle period
// over; after a collection the heap it left is the new floor.
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { FakeClock } from '../../test/helpers/fake-clock.js';
import { createIdleGc, eventLoopBusyShare, v8CommittedBytes } from './idle-gc.js';

const MiB = 2 ** 20;
const INTERVAL_MS = 2_000;

/** Runs the service over scripted readings, one per interval; returns how many collections. */
async function run(readings: readonly { heapMiB: number; busy: number }[]): Promise<number[]> {
  const clock = new FakeClock();
  let heapMiB = readings[0]?.heapMiB ?? 0;
  let busy = 0;
  let collections = 0;
  const after: number[] = [];
  const service = createIdleGc(
    { intervalMs: INTERVAL_MS, growthBytes: 16 * MiB, idleShare: 0.05, idleMs: 6_000 },
    {
      logger: pino({ level: 'silent' }),
      clock,
      collect: () => {
        collections++;
        heapMiB = 50; // What a collection leaves.
      },
      readHeapBytes: () => heapMiB * MiB,
      readBusyShare: () => busy,
    },
  );
  const abort = new AbortController();
  await service.start(abort.signal);
  for (const reading of readings) {
    heapMiB = reading.heapMiB;
    busy = reading.busy;
    await clock.waitForSleep((ms) => ms === INTERVAL_MS);
    clock.advance(INTERVAL_MS);
    await clock.waitForSleep((ms) => ms === INTERVAL_MS);
    after.push(collections);
  }
  await service.close();
  return after;
}

describe('idle collection', () => {
  it('collects twice once the heap grew and the event loop was idle for the idle period', async () => {
    // Start at 50 MiB; a burst to 90 MiB; then idle: the third idle interval collects.
    const counts = await run([
      { heapMiB: 50, busy: 0 },
      { heapMiB: 90, busy: 0.9 },
      { heapMiB: 90, busy: 0.01 },
      { heapMiB: 90, busy: 0.01 },
      { heapMiB: 90, busy: 0.01 },
      // What the collections left: the new floor.
      { heapMiB: 52, busy: 0.01 },
    ]);
    expect(counts).toEqual([0, 0, 0, 0, 2, 2]);
  });

  it('a busy interval starts the idle period over', async () => {
    const counts = await run([
      { heapMiB: 50, busy: 0.5 },
      { heapMiB: 90, busy: 0.01 },
      { heapMiB: 90, busy: 0.01 },
      { heapMiB: 90, busy: 0.5 },
      { heapMiB: 90, busy: 0.01 },
      { heapMiB: 90, busy: 0.01 },
      { heapMiB: 90, busy: 0.01 },
    ]);
    expect(counts).toEqual([0, 0, 0, 0, 0, 0, 2]);
  });

  it('never collects an idle heap that did not grow by the threshold', async () => {
    const counts = await run([
      { heapMiB: 50, busy: 0 },
      { heapMiB: 65, busy: 0.01 },
      { heapMiB: 65, busy: 0.01 },
      { heapMiB: 65, busy: 0.01 },
      { heapMiB: 65, busy: 0.01 },
    ]);
    expect(counts).toEqual([0, 0, 0, 0, 0]);
  });

  it("reads V8's committed heap and the event loop's busy share by default", () => {
    expect(v8CommittedBytes()).toBeGreaterThan(0);
    const share = eventLoopBusyShare()();
    expect(share).toBeGreaterThanOrEqual(0);
    expect(share).toBeLessThanOrEqual(1);
  });
});
