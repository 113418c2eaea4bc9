import { describe, expect, it } from 'vitest';
import { ProgressWatch } from './liveness.js';

describe('ProgressWatch', () => {
  it('measures the wait from the first outstanding item, and restarts it on progress only', () => {
    const watch = new ProgressWatch();
    expect(watch.waitingFor(1000)).toBe(0);
    watch.add(2, 1000);
    watch.add(1, 4000); // more work does not restart the wait
    expect(watch.waitingFor(6000)).toBe(5000);
    watch.settle(1, 7000);
    expect(watch.outstanding).toBe(2);
    expect(watch.waitingFor(9000)).toBe(2000);
    watch.drop(1); // given up on, not progress
    expect(watch.waitingFor(10_000)).toBe(3000);
    watch.settle(1, 11_000);
    expect(watch.outstanding).toBe(0);
    expect(watch.waitingFor(50_000)).toBe(0);
    watch.add(1, 60_000); // a new wait starts with the next outstanding item
    expect(watch.waitingFor(61_000)).toBe(1000);
  });
});
