// The readiness of the buffer ("queue" in /readyz): whether what the collector holds is moving
// towards the gateway, and whether it would survive a restart.
import type { BufferStats } from '../buffer/types.js';
import type { ComponentHealth } from './health-server.js';

/** /readyz is unhealthy once the buffer holds more than this share of its byte capacity. */
export const QUEUE_UNHEALTHY_RATIO = 0.9;
/** The oldest item came back unsettled this many times with nothing acked past it: stuck. */
export const STUCK_HEAD_RETURNS = 3;
/** Or it came back once and is still the oldest this long after. */
export const STUCK_HEAD_MS = 5 * 60_000;

/**
 * In order: a stuck head of queue (delivery is not progressing, the same item keeps coming
 * back), a buffer over 90 % full (the gateway is not keeping up), then the disk tier missing
 * (memory-only: nothing survives a restart) are not ready. A paused (full) disk and any
 * quarantined records are reported, and ready.
 */
export function queueHealth(
  buffer: { stats(): BufferStats },
  capacityBytes: number,
  now: number,
): ComponentHealth {
  const stats = buffer.stats();
  const { head } = stats;
  if (head && (head.returns >= STUCK_HEAD_RETURNS || now - head.since >= STUCK_HEAD_MS)) {
    const seconds = Math.round((now - head.since) / 1000);
    return {
      state: 'unhealthy',
      reason: `head of queue stuck: item ${head.id} came back unsettled ${String(head.returns)} times in ${String(seconds)} s with nothing behind it delivered (see the gateway stream's log)`,
    };
  }
  const used = stats.memory.bytes + stats.disk.bytes;
  const percent = Math.round((100 * used) / capacityBytes);
  if (used > QUEUE_UNHEALTHY_RATIO * capacityBytes) {
    return {
      state: 'unhealthy',
      reason: `buffer ${String(percent)}% full (${String(used)} of ${String(capacityBytes)} bytes): the gateway is not keeping up`,
    };
  }
  if (!stats.diskAvailable) {
    return {
      state: 'degraded',
      reason:
        'spill disk unavailable: running memory-only, nothing buffered survives a restart (see the buffer error in the log)',
    };
  }
  const notes = [`${String(percent)}% full`, 'disk available'];
  if (stats.diskFull) notes.push('disk full: writes paused');
  if (stats.quarantined > 0) notes.push(`${String(stats.quarantined)} records quarantined`);
  return { state: 'ok', reason: notes.join(', ') };
}
