// The heap watch on a fake clock and a scripted heap reading: pressure is declared once when the
// heap crosses the high mark (logged once, the buffer told once), kept while the heap sits
// between the marks, and lifted once below the low mark. Close ends its loop.
import { describe, expect, it } from 'vitest';
import { FakeClock } from '../../test/helpers/fake-clock.js';
import { captureLogs } from '../../test/helpers/gateway-harness.js';
import { createHeapWatch, v8Heap } from './heap-watch.js';

const MiB = 2 ** 20;

describe('heap watch', () => {
  it('sheds the buffer once at the high mark, keeps it shed between the marks, restores it below the low mark', async () => {
    const clock = new FakeClock();
    const { logger, lines } = captureLogs();
    const usedMiB = [50, 90, 95, 80, 60, 60];
    let reads = 0;
    const calls: boolean[] = [];
    const watch = createHeapWatch(
      { intervalMs: 1_000 },
      {
        logger,
        clock,
        readHeap: () => ({ usedBytes: (usedMiB[reads++] ?? 60) * MiB, limitBytes: 100 * MiB }),
        shed: (pressure) => {
          calls.push(pressure);
          return { items: pressure ? 12 : 0, bytes: pressure ? 3 * MiB : 0 };
        },
      },
    );
    const abort = new AbortController();
    await watch.start(abort.signal);
    for (let i = 1; i < usedMiB.length; i++) {
      await clock.waitForSleep((ms) => ms === 1_000);
      clock.advance(1_000);
    }
    await clock.waitForSleep((ms) => ms === 1_000);
    expect(reads).toBe(usedMiB.length);
    expect(calls).toEqual([true, false]);
    const warnings = lines.filter((line) => line.msg.startsWith('heap near its limit'));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ usedMiB: 90, limitMiB: 100, movedItems: 12 });
    expect(lines.filter((line) => line.msg.startsWith('heap back under'))).toHaveLength(1);
    await watch.close();
    expect(clock.pending()).toEqual([]);
  });

  it("reads V8's own heap figures by default", () => {
    const reading = v8Heap();
    expect(reading.limitBytes).toBeGreaterThan(reading.usedBytes);
    expect(reading.usedBytes).toBeGreaterThan(0);
  });
});
