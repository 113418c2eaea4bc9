import { DROP_REASONS, type BufferStats, type DropReason } from '../../collector/buffer/types.js';

/** A BufferStats snapshot of an empty buffer, with the given fields replaced. */
export function bufferStats(overrides: Partial<BufferStats> = {}): BufferStats {
  const dropped = Object.fromEntries(DROP_REASONS.map((reason) => [reason, 0])) as Record<
    DropReason,
    number
  >;
  return {
    memory: { depth: 0, bytes: 0 },
    disk: { depth: 0, bytes: 0 },
    pending: 0,
    inflight: 0,
    spilled: 0,
    replayed: 0,
    recovered: 0,
    dropped,
    quarantined: 0,
    salvage: { recovered: 0, lost: 0 },
    head: undefined,
    diskAvailable: true,
    diskFull: false,
    ...overrides,
  };
}
