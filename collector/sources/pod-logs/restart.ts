// A container restart: the instance before the current one may have lines written after our
// last read and before it stopped. It is read to its end once, with `previous=true`, under its
// own identity, while the new instance is read from its beginning.
//
// A follow stream reopened between the restart and the watch reporting it reads the new
// instance's log under the previous instance's identity (the log API names no instance; issue
// #5). The previous instance's read then tells the misread, and the new instance skips what went
// out under the previous identity.
import type { SavedCheckpoint } from './checkpoint-store.js';
import { comparePosition } from './container-log.js';
import type { LinePosition } from './joiner.js';

/** What the source knows of the instance before the current one. */
export interface PreviousInstance {
  /** Its ContainerLog in this process, if a stream of it was opened here. */
  readonly inProcess: { readonly readToEnd: boolean } | undefined;
  /** Its stored checkpoint (empty without checkpoint_dir or when never released). */
  readonly saved: SavedCheckpoint;
}

/**
 * Whether the instance before `restartCount` is unfinished: it was followed (a stream in this
 * process, or a checkpoint or intents from an earlier run) and not yet read to its end. An
 * instance we never followed is not read: its lines before the restart were never ours to take.
 */
export function previousUnfinished(restartCount: number, previous: PreviousInstance): boolean {
  if (restartCount <= 0) return false;
  if (previous.saved.finished === true) return false;
  if (previous.inProcess) return !previous.inProcess.readToEnd;
  return previous.saved.position !== undefined || previous.saved.intents.length > 0;
}

/** How a `previous=true` read (non-follow) ended. */
export interface PreviousRead {
  /** The connection was closed on our side: preempted, idle, a further restart, stopping. */
  readonly closedByUs: boolean;
  /** Lines the connection delivered. */
  readonly lines: number;
  /** The request or the stream failed (undefined: the server ended the body). */
  readonly error: unknown;
  /** The HTTP status of `error`, if it carries one. */
  readonly code: number | undefined;
}

/**
 * What follows a previous-instance read: `finished` (read to its end, or the server has no
 * previous instance: 400, or the pod is gone: 404), `again` (closed by us, or cut after it
 * delivered lines: resume from its position at once), or `failed` (back off and retry).
 */
export function previousReadEnd(read: PreviousRead): 'finished' | 'again' | 'failed' {
  if (read.closedByUs) return 'again';
  if (read.error === undefined) return 'finished';
  if (read.code === 400 || read.code === 404) return 'finished';
  return read.lines > 0 ? 'again' : 'failed';
}

/** The end of a previous-instance read that the server ended, from the instance's position. */
export interface PreviousReadSeen {
  /** The instance's read position: what went out under its identity (checkpoint or in process). */
  readonly readThrough: LinePosition | undefined;
  /**
   * The last line the read saw, skipped ones included: the instance's real end (undefined: it
   * saw none at or after the second of `readThrough`).
   */
  readonly lastSeen: LinePosition | undefined;
}

/**
 * The position through which the new instance's lines already went out under the previous
 * instance's identity, if they did. The read asked from the second of `readThrough`, so it sees
 * the line at `readThrough` if that line is the previous instance's. If it ends before it, the
 * lines past its end were read from the new instance's log, from its beginning (the misread
 * connection asked from a second before all of them), numbered as a fresh read numbers them.
 */
export function misreadThrough(seen: PreviousReadSeen): LinePosition | undefined {
  const { readThrough, lastSeen } = seen;
  if (!readThrough) return undefined;
  if (lastSeen && comparePosition(readThrough, lastSeen) <= 0) return undefined;
  return readThrough;
}

/** The pod status's times of a restart, as whole seconds (undefined: not reported). */
export interface RestartTimes {
  /** The previous instance's `lastState.terminated.finishedAt`. */
  readonly previousFinishedSec: number | undefined;
  /** The new instance's `state.running.startedAt` (or `state.terminated.startedAt`). */
  readonly startedSec: number | undefined;
}

/**
 * Without a previous log to read (400: the kubelet knows no previous instance), the pod status
 * tells a misread: a position after the new instance's start second is the new instance's, one
 * before it is the previous one's. The start second itself is the new instance's only if the
 * previous one finished in an earlier second; otherwise (or without a start time) it is
 * ambiguous, and nothing is skipped.
 */
export function misreadByStatus(
  readThrough: LinePosition,
  times: RestartTimes,
): 'misread' | 'not misread' | 'ambiguous' {
  const { previousFinishedSec: finished, startedSec: started } = times;
  if (started === undefined) return 'ambiguous';
  if (readThrough.sec < started) return 'not misread';
  if (readThrough.sec > started) return 'misread';
  return finished !== undefined && finished < started ? 'misread' : 'ambiguous';
}

/**
 * Where to read the previous instance again after a misread: from the start of the connection
 * that misread (the last one that delivered lines), if the previous instance has lines after it
 * that no connection delivered. Undefined when there are none, or the start is unknown (the
 * misread was the instance's first connection, or it happened before a restart of the collector).
 */
export function misreadRecoveryFrom(read: {
  /** Where the last connection that delivered lines under the instance started. */
  readonly misreadFrom: LinePosition | undefined;
  readonly readThrough: LinePosition;
  readonly lastSeen: LinePosition | undefined;
}): LinePosition | undefined {
  const { misreadFrom, readThrough, lastSeen } = read;
  if (!misreadFrom) return undefined;
  if (lastSeen) return comparePosition(misreadFrom, lastSeen) < 0 ? misreadFrom : undefined;
  // Nothing seen from the second of readThrough on: the instance ended in an earlier second.
  return misreadFrom.sec < readThrough.sec ? misreadFrom : undefined;
}
