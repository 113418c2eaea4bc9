// Heap pressure: a long-lived collector whose V8 heap nears its limit (the image derives the
// limit from the container's memory limit, so the heap limit comes before the OOM killer) logs
// once and moves the buffer's memory tier to disk, where pending items survive even if the
// process is killed after all. When the heap is back under the low mark, the buffer gets its
// memory tier back and that is logged once too.
import { getHeapStatistics } from 'node:v8';
import type { Logger } from 'pino';
import type { Clock } from '../../shared/clock.js';
import type { Service } from '../../shared/lifecycle/service.js';
import { periodicService } from './periodic-service.js';

export interface HeapReading {
  readonly usedBytes: number;
  readonly limitBytes: number;
}

export interface HeapWatchOptions {
  /** Pressure starts at this share of the heap limit (default 0.85). */
  readonly highShare?: number;
  /** And ends below this share (default 0.7): a gap, so it does not flap. */
  readonly lowShare?: number;
  readonly intervalMs?: number;
}

export interface HeapWatchDeps {
  readonly logger: Logger;
  readonly clock: Clock;
  /** What the heap holds now; V8's own figures by default. */
  readonly readHeap?: () => HeapReading;
  /** The buffer's pressure switch (DurableBuffer.shedMemory). */
  readonly shed: (pressure: boolean) => { readonly items: number; readonly bytes: number };
}

export const v8Heap = (): HeapReading => {
  const stats = getHeapStatistics();
  return { usedBytes: stats.used_heap_size, limitBytes: stats.heap_size_limit };
};

export function createHeapWatch(options: HeapWatchOptions, deps: HeapWatchDeps): Service {
  const high = options.highShare ?? 0.85;
  const low = options.lowShare ?? 0.7;
  const intervalMs = options.intervalMs ?? 10_000;
  const readHeap = deps.readHeap ?? v8Heap;
  const logger = deps.logger.child({ component: 'heap-watch' });
  let underPressure = false;

  function check(): void {
    const { usedBytes, limitBytes } = readHeap();
    if (limitBytes <= 0) return;
    const share = usedBytes / limitBytes;
    const heap = {
      usedMiB: Math.round(usedBytes / 2 ** 20),
      limitMiB: Math.round(limitBytes / 2 ** 20),
    };
    if (!underPressure && share >= high) {
      underPressure = true;
      const moved = deps.shed(true);
      logger.warn(
        { ...heap, movedItems: moved.items, movedBytes: moved.bytes },
        'heap near its limit: the buffer keeps new items on disk until it is back under the low mark (raise resources.limits.memory)',
      );
    } else if (underPressure && share < low) {
      underPressure = false;
      deps.shed(false);
      logger.info(heap, 'heap back under the low mark: the buffer uses its memory tier again');
    }
  }

  return periodicService(
    { name: 'heap-watch', intervalMs, clock: deps.clock, lookAtStart: true },
    check,
  );
}
