// One log connection into a ContainerLog: the request, its chunks split into lines as they
// arrive, and an idle watchdog that closes a connection no byte arrived on for too long (a
// half-open connection, dropped by a proxy without a FIN, would otherwise hold its slot and
// deliver nothing forever). It reports what it read and how it ended; what the session does
// next is decided by the caller.
import type { Clock } from '../../../shared/clock.js';
import type { ContainerLog } from './container-log.js';
import type { LinePosition } from './joiner.js';
import type { LogRequest, PodLogReader } from './kube-access.js';
import { LineSplitter } from './line-splitter.js';

/** What one connection read, and how it ended. */
export interface ConnectionRead {
  lines: number;
  /** It read lines past the position it started from (not only lines we already had). */
  advanced: boolean;
  lastByteAtMs: number;
  /** Closed on our side: the idle watchdog, or the container restarted. */
  closedByUs: boolean;
  /** The request or the stream failed while the connection was ours. */
  failed: boolean;
  error: unknown;
}

export interface ConnectionDeps {
  readonly clock: Clock;
  readonly logs: PodLogReader;
  /** No byte for this long closes the connection (at least 1 ms). */
  readonly idleMs: number;
  /** ingest.maxLineBytes now (0: no limit); the splitter keeps a little more to mark the cut. */
  readonly maxLineBytes: number;
  /** Lines and bytes as they are read; counted at the next flush, not once per chunk. */
  countRead(lines: number, bytes: number): void;
  /** `ready`: the log holds a full batch; `all`: the connection ended, its lines go out now. */
  requestFlush(scope: 'ready' | 'all'): void;
}

export interface ConnectionHooks {
  /** The connection is open; `close` ends it early, on our side (a restart). */
  opened(close: () => void): void;
  /** The connection ended (before its last partial record is flushed): `from` is where it began. */
  ended(read: ConnectionRead, from: LinePosition | undefined): void;
}

/** Reads one log connection into `log` until it ends, the signal aborts or it falls idle. */
export async function readLogConnection(
  { log, request, signal }: { log: ContainerLog; request: LogRequest; signal: AbortSignal },
  deps: ConnectionDeps,
  hooks: ConnectionHooks,
): Promise<ConnectionRead> {
  const { clock } = deps;
  const from = log.resumeAfter();
  log.beginConnection();
  // The connection ends with the session, or earlier when the idle watchdog closes it.
  const connection = new AbortController();
  const connectionSignal = AbortSignal.any([signal, connection.signal]);
  const read: ConnectionRead = {
    lines: 0,
    advanced: false,
    lastByteAtMs: clock.now(),
    closedByUs: false,
    failed: false,
    error: undefined,
  };
  hooks.opened(() => {
    read.closedByUs = true;
    connection.abort();
  });
  const watchdog = watchIdle(read, connection, connectionSignal, deps);
  try {
    await readBody({ log, request, signal: connectionSignal }, read, deps);
  } catch (err: unknown) {
    // Closed on our side (preempted, idle, stopping): an error here is that close.
    if (!connectionSignal.aborted) {
      read.failed = true;
      read.error = err;
    }
  } finally {
    read.advanced = log.resumeAfter() !== from;
    hooks.ended(read, from);
    connection.abort();
    await watchdog;
    log.flushJoiner(clock.now(), false);
    deps.requestFlush('all');
  }
  return read;
}

/** Closes the connection when no byte arrived for idleMs; ends with it. */
async function watchIdle(
  read: { lastByteAtMs: number; closedByUs: boolean },
  connection: AbortController,
  connectionSignal: AbortSignal,
  { clock, idleMs: configured }: ConnectionDeps,
): Promise<void> {
  const idleMs = Math.max(1, configured);
  // Each turn sleeps until the earliest moment the stream can have been idle for idleMs.
  while (!connectionSignal.aborted) {
    const quietMs = clock.now() - read.lastByteAtMs;
    if (quietMs >= idleMs) {
      read.closedByUs = true;
      connection.abort();
      return;
    }
    try {
      await clock.sleep(idleMs - quietMs, connectionSignal);
    } catch {
      return;
    }
  }
}

/** Reads one log connection into its ContainerLog, counting lines into `read`. */
async function readBody(
  {
    log,
    request,
    signal: connectionSignal,
  }: { log: ContainerLog; request: LogRequest; signal: AbortSignal },
  read: { lines: number; lastByteAtMs: number },
  deps: ConnectionDeps,
): Promise<void> {
  const { clock } = deps;
  const splitter = new LineSplitter(deps.maxLineBytes > 0 ? deps.maxLineBytes + 64 : 0);
  // Runs once per chunk, synchronously, as the socket delivers it: a followed log comes in
  // 100-200 byte chunks, so nothing here may cost more than it must (no promise, no stream).
  let now = clock.now();
  const onLine = (text: string, cut: boolean): void => {
    log.accept(text, cut, now);
  };
  const onChunk = (chunk: Buffer): void => {
    now = clock.now();
    read.lastByteAtMs = now;
    const lines = splitter.push(chunk, onLine);
    // Counted as read, so a stream that stays open for days still shows its lines.
    read.lines += lines;
    deps.countRead(lines, chunk.length);
    if (log.hasFullBatch()) deps.requestFlush('ready');
  };
  await deps.logs.read(request, connectionSignal, onChunk);
  // An unterminated last line is whole only if the server ended the stream. On our abort
  // it may be a fragment: drop it, the next connection reads the line again.
  const last = splitter.end();
  if (last && !connectionSignal.aborted) {
    log.accept(last.text, last.cut, clock.now());
    read.lines++;
    deps.countRead(1, 0);
  }
}
