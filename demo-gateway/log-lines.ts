import type { AgentHealth, LogBatch, LogEntry } from '../proto/index.js';
import type { HeartbeatView, LevelNumber } from './api-types.js';
import type { NewLogLine } from './log-store.js';

interface Received {
  readonly sessionId: string;
  readonly receivedAt: number;
}

const decoder = new TextDecoder();

/** Unix ms from the entry's nanoseconds; the receive time when the agent sent none. */
function timeMsOf(entry: LogEntry, receivedAt: number): number {
  if (entry.timestamp === '' || entry.timestamp === '0') return receivedAt;
  try {
    return Number(BigInt(entry.timestamp) / 1_000_000n);
  } catch {
    return receivedAt;
  }
}

function levelOf(level: number): LevelNumber {
  return level >= 1 && level <= 4 ? (level as LevelNumber) : 0;
}

/** One stored record per LogEntry: a joined multi-line record stays one record. */
export function logLinesOf(batch: LogBatch, received: Received): NewLogLine[] {
  return batch.entries.map((entry) => {
    const raw = entry.raw.byteLength > 0 ? decoder.decode(entry.raw) : entry.message;
    // The collector's message of a joined record may hold every line: the row shows the first.
    const firstLine = (entry.message === '' ? raw : entry.message).split('\n', 1)[0] ?? '';
    return {
      kind: 'line',
      sessionId: received.sessionId,
      timeMs: timeMsOf(entry, received.receivedAt),
      receivedAt: received.receivedAt,
      namespace: entry.namespace,
      pod: entry.podName,
      container: entry.container,
      workload: entry.workload,
      workloadKind: entry.workloadKind,
      node: entry.nodeName,
      level: levelOf(entry.level),
      message: firstLine,
      raw,
      lineCount: raw.split('\n').length,
      truncated: entry.truncated,
    };
  });
}

/**
 * The agent drops lines over its rate limit and counts them in its heartbeat: a rise of that
 * counter becomes a marker in the log, where the gap is.
 */
export function rateLimitMarker(
  previous: HeartbeatView | undefined,
  health: AgentHealth | undefined,
  received: Received,
): NewLogLine[] {
  const now = Number(health?.droppedRateLimited ?? 0);
  const before = previous?.droppedRateLimited ?? 0;
  // A restarted agent starts its counters at zero again.
  const dropped = now >= before ? now - before : now;
  if (dropped <= 0) return [];
  const message = `${dropped} line(s) dropped by the agent's rate limit since the last heartbeat`;
  return [
    {
      kind: 'rate-limited',
      sessionId: received.sessionId,
      timeMs: received.receivedAt,
      receivedAt: received.receivedAt,
      namespace: '',
      pod: '',
      container: '',
      workload: '',
      workloadKind: '',
      node: '',
      level: 3,
      message,
      raw: message,
      lineCount: 1,
      truncated: false,
    },
  ];
}
