// A full garbage collection once the process falls idle after its heap grew: the collector's work
// comes in bursts (the first list of 5000 pods, a rollout, a log backlog) followed by quiet, and
// V8 collects only when allocation asks it to, so after a burst the garbage it left (parsed list
// pages, HTTP and protobuf buffers) and a young generation grown to its maximum stayed
// committed for as long as the process idled: measured in the state-watch bench at 2500 pods,
// 206.6 MiB RSS before one full collection and 174.2 MiB after (young generation 32 -> 1 MiB,
// ArrayBuffers 17 -> 0.2 MiB). An idle process costs nothing to pause, so the collection runs
// only when the event loop has been nearly idle for `idleMs` and the heap (V8's committed heap
// plus external memory) grew by `growthBytes` since the last one. `idleMs` is 6 s because V8
// shrinks its young generation in a collection only once its allocation rate over the last 5 s
// is low: measured on Node 20 with a synthetic burst, a collection 4 s after it kept the young
// generation at 32 MiB, one after 6 s shrank it to 1 MiB. Two collections in a row: the second
// returned more (in that measurement, RSS 80 -> 48 MiB).
import { performance, type EventLoopUtilization } from 'node:perf_hooks';
import { getHeapStatistics } from 'node:v8';
import type { Logger } from 'pino';
import type { Clock } from '../../shared/clock.js';
import type { Service } from '../../shared/lifecycle/service.js';
import { periodicService } from './periodic-service.js';

export interface IdleGcOptions {
  /** How often to look (default 2 s). */
  readonly intervalMs?: number;
  /** The growth since the last collection that makes one worth it (default 16 MiB). */
  readonly growthBytes?: number;
  /** The event loop's busy share over an interval below which it counts as idle (0.05). */
  readonly idleShare?: number;
  /** How long the event loop must have been idle (default 6 s; whole intervals, at least one). */
  readonly idleMs?: number;
}

export interface IdleGcDeps {
  readonly logger: Logger;
  readonly clock: Clock;
  /** A full collection (main.ts: V8's gc, exposed at start). */
  readonly collect: () => void;
  /** The heap's committed bytes plus external memory; V8's own figures by default. */
  readonly readHeapBytes?: () => number;
  /** The event loop's busy share since the previous call (0..1); perf_hooks by default. */
  readonly readBusyShare?: () => number;
}

export const v8CommittedBytes = (): number => {
  const stats = getHeapStatistics();
  return stats.total_heap_size + stats.external_memory;
};

/** The busy share of the event loop between consecutive calls. */
export function eventLoopBusyShare(): () => number {
  let previous: EventLoopUtilization = performance.eventLoopUtilization();
  return () => {
    const now = performance.eventLoopUtilization();
    const share = performance.eventLoopUtilization(now, previous).utilization;
    previous = now;
    return share;
  };
}

export function createIdleGc(options: IdleGcOptions, deps: IdleGcDeps): Service {
  const intervalMs = options.intervalMs ?? 2_000;
  const growthBytes = options.growthBytes ?? 16 * 2 ** 20;
  const idleShare = options.idleShare ?? 0.05;
  const idleChecks = Math.max(1, Math.ceil((options.idleMs ?? 6_000) / intervalMs));
  const readHeapBytes = deps.readHeapBytes ?? v8CommittedBytes;
  const readBusyShare = deps.readBusyShare ?? eventLoopBusyShare();
  const logger = deps.logger.child({ component: 'idle-gc' });
  /** The heap right after the last collection (or at start). */
  let floor = readHeapBytes();
  /** Consecutive intervals the event loop was idle in. */
  let idle = 0;

  function check(): void {
    idle = readBusyShare() < idleShare ? idle + 1 : 0;
    const before = readHeapBytes();
    // The heap may shrink on its own: the floor follows it down.
    if (before < floor) floor = before;
    if (before - floor < growthBytes || idle < idleChecks) return;
    deps.collect();
    deps.collect();
    floor = readHeapBytes();
    logger.debug(
      { beforeMiB: Math.round(before / 2 ** 20), afterMiB: Math.round(floor / 2 ** 20) },
      'idle after the heap grew: collected garbage',
    );
  }

  return periodicService({ name: 'idle-gc', intervalMs, clock: deps.clock }, check);
}
