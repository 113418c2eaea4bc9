// An idle collector's CPU: a connected session with nothing in flight arms no sweep timer (the
// sweep of overdue acks and stalls), and the first send arms it again. Observed on the fake
// clock's sleeps: the flush interval here (1234 ms) is a delay only the sweep asks for.
import { setImmediate as turn } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { stateItem, startHarness, until } from '../../test/helpers/gateway-harness.js';

const FLUSH_MS = 1234;

describe('gateway session idle timers', () => {
  it('sleeps the overdue-ack sweep while nothing is in flight and wakes it on the next send', async () => {
    await using h = await startHarness({
      gateway: { holdAcks: true },
      stream: { flushIntervalMs: FLUSH_MS, redeliveryTimeoutMs: 5000 },
    });
    const sweeps = (): number => h.clock.sleeps.filter((ms) => ms === FLUSH_MS).length;
    const session = await h.gateway.waitForSession();
    await until(() => h.stream.status().state === 'ready', 'ready');
    // The heartbeat's sleep is requested in the same turn as the sweep's would be.
    await h.clock.waitForSleep((ms) => ms === 30_000);
    await turn();
    expect(h.clock.pending()).not.toContain(FLUSH_MS);
    // Ten flush intervals of idle time (short of the heartbeat): not one sweep.
    for (let i = 0; i < 10; i++) {
      h.clock.advance(FLUSH_MS);
      await turn();
    }
    expect(sweeps()).toBe(0);

    // A send awaiting its Ack wakes the sweep.
    h.buffer.enqueue(stateItem(1));
    await h.gateway.waitForStored('state', 1);
    await h.clock.waitForSleep((ms) => ms === FLUSH_MS);
    h.gateway.releaseAcks(session.sessionId);
    await until(() => h.buffer.stats().inflight === 0, 'settled');
    // Its interval ends with nothing outstanding: it sleeps again without a timer.
    h.clock.advance(FLUSH_MS);
    await turn();
    await turn();
    const afterSend = sweeps();
    for (let i = 0; i < 10; i++) {
      h.clock.advance(FLUSH_MS);
      await turn();
    }
    expect(h.clock.pending()).not.toContain(FLUSH_MS);
    expect(sweeps()).toBe(afterSend);
  });
});
