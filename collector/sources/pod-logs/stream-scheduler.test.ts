// The stream scheduler with sessions that hold their slot until aborted: never more than the
// cap at once, round-robin rotation by the fairness slice while others wait, backoff on retry.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { FakeClock } from '../../../test/helpers/fake-clock.js';
import { StreamScheduler, type SchedulerOptions, type SessionOutcome } from './stream-scheduler.js';

/** vi.waitFor's default 1 s is too short on a shared 2-core machine; nothing here is timed. */
const WAIT = { timeout: 10_000 };

const controllers: AbortController[] = [];
afterEach(() => {
  for (const c of controllers.splice(0)) c.abort();
});

/** A scheduler whose sessions follow until aborted (then 'again'), unless `outcome` says else. */
function harness(
  options: Partial<SchedulerOptions>,
  outcome?: (key: string) => SessionOutcome | undefined,
) {
  const clock = new FakeClock();
  const lifetime = new AbortController();
  controllers.push(lifetime);
  const started: string[] = [];
  let open = 0;
  let mostOpen = 0;
  const scheduler = new StreamScheduler(
    { maxConcurrent: 3, sliceMs: 1_000, initialBackoffMs: 1_000, maxBackoffMs: 8_000, ...options },
    {
      clock,
      signal: lifetime.signal,
      run: async (key, signal) => {
        started.push(key);
        open++;
        mostOpen = Math.max(mostOpen, open);
        try {
          const now = outcome?.(key);
          if (now !== undefined) return now;
          await new Promise<void>((resolve) => {
            signal.addEventListener(
              'abort',
              () => {
                resolve();
              },
              { once: true },
            );
          });
          return 'again';
        } finally {
          open--;
        }
      },
    },
  );
  return { clock, scheduler, started, lifetime, mostOpen: () => mostOpen, open: () => open };
}

const keys = (n: number): string[] => Array.from({ length: n }, (_, i) => `k${String(i)}`);

describe('StreamScheduler', () => {
  it('runs at most maxConcurrent sessions and queues the rest', () => {
    const h = harness({ maxConcurrent: 3 });
    for (const key of keys(10)) h.scheduler.want(key);
    expect(h.started).toEqual(['k0', 'k1', 'k2']);
    expect(h.scheduler.stats()).toEqual({ active: 3, queued: 7, maxActive: 3 });
    // Wanting a running or queued key again changes nothing.
    h.scheduler.want('k0');
    h.scheduler.want('k5');
    expect(h.scheduler.stats()).toEqual({ active: 3, queued: 7, maxActive: 3 });
  });

  it('rotates round-robin by the fairness slice, so every container is served under the cap', async () => {
    const h = harness({ maxConcurrent: 3, sliceMs: 1_000 });
    for (const key of keys(10)) h.scheduler.want(key);
    // Before the slice is used up, nobody is preempted.
    h.clock.advance(999);
    h.scheduler.rebalance();
    await vi.waitFor(() => {
      expect(h.started).toHaveLength(3);
    }, WAIT);
    for (let round = 0; round < 4; round++) {
      const before = h.started.length;
      h.clock.advance(1_000);
      h.scheduler.rebalance();
      await vi.waitFor(() => {
        expect(h.started.length).toBe(before + 3);
      }, WAIT);
      expect(h.scheduler.stats().active).toBe(3);
    }
    // 15 sessions: k0..k9, then k0..k4 again, in queue order.
    expect(h.started).toEqual([...keys(10), ...keys(5)]);
    expect(h.mostOpen()).toBe(3);
    expect(h.scheduler.stats().maxActive).toBe(3);
  });

  it('preempts only as many sessions as there are containers waiting', async () => {
    const h = harness({ maxConcurrent: 3 });
    for (const key of keys(4)) h.scheduler.want(key);
    h.clock.advance(1_000);
    h.scheduler.rebalance();
    await vi.waitFor(() => {
      expect(h.started).toEqual(['k0', 'k1', 'k2', 'k3']);
    }, WAIT);
    // k0 went to the back of the queue; k1 and k2 kept their slots.
    expect(h.scheduler.stats()).toEqual({ active: 3, queued: 1, maxActive: 3 });
    // Nothing waits when all fit: no preemption however long they run.
    const all = harness({ maxConcurrent: 3 });
    for (const key of keys(3)) all.scheduler.want(key);
    all.clock.advance(60_000);
    all.scheduler.rebalance();
    expect(all.started).toHaveLength(3);
  });

  it('backs off a retrying session (doubling, jittered, capped) and frees its slot meanwhile', async () => {
    const h = harness({ maxConcurrent: 1 }, (key) => (key === 'bad' ? 'retry' : undefined));
    h.scheduler.want('bad');
    h.scheduler.want('good');
    await vi.waitFor(() => {
      expect(h.started).toEqual(['bad', 'good']);
    }, WAIT);
    expect(h.scheduler.stats().active).toBe(1);
    // The backoff ends while 'good' holds the only slot: 'bad' waits in the queue for it.
    for (let i = 0; i < 5; i++) {
      const before = h.started.length;
      h.clock.advance(10_000);
      await vi.waitFor(() => {
        expect(h.scheduler.stats().queued).toBe(1);
      }, WAIT);
      h.scheduler.rebalance();
      await vi.waitFor(() => {
        expect(h.started.length).toBeGreaterThan(before);
      }, WAIT);
    }
    const delays = h.clock.sleeps;
    expect(delays.length).toBeGreaterThanOrEqual(3);
    const nominal = [1_000, 2_000, 4_000, 8_000, 8_000, 8_000];
    delays.forEach((ms, i) => {
      const base = nominal[i] ?? 8_000;
      expect(ms).toBeGreaterThanOrEqual(base * 0.8);
      expect(ms).toBeLessThanOrEqual(base * 1.2);
    });
    expect(h.mostOpen()).toBe(1);
  });

  it("forgets a 'done' session and an unwanted one, and starts nothing after the lifetime ends", async () => {
    const h = harness({ maxConcurrent: 2 }, (key) => (key === 'gone' ? 'done' : undefined));
    h.scheduler.want('gone');
    h.scheduler.want('a');
    await vi.waitFor(() => {
      expect(h.scheduler.wanted().has('gone')).toBe(false);
    }, WAIT);
    h.scheduler.unwant('a');
    await vi.waitFor(() => {
      expect(h.scheduler.stats().active).toBe(0);
    }, WAIT);
    expect(h.started).toEqual(['gone', 'a']);
    h.lifetime.abort();
    h.scheduler.want('late');
    expect(h.started).toEqual(['gone', 'a']);
  });
});
