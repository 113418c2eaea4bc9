// A container restart: the instance before the current one may have lines written after our
// last read and before it stopped. It is read to its end once, with `previous=true`, under its
// own identity, while the new instance is read from its beginning.
import type { SavedCheckpoint } from './checkpoint-store.js';

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
