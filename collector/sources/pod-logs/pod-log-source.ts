// The pod log source: a pod reflector feeds eligibility, the scheduler runs one follow stream
// per eligible container, each container instance's ContainerLog turns lines into batches, and
// batches go to the Sink under deterministic ids. Checkpoints advance only on the buffer's
// release of a batch (see docs/pod-logs.md).
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { V1Pod } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { Clock } from '../../../shared/clock.js';
import type { ReleaseListener } from '../../buffer/types.js';
import type { Sink, Source } from '../source.js';
import {
  memoryOnlyCheckpoints,
  openCheckpointStore,
  type CheckpointStore,
  type ContainerInstance,
  type InstanceMeta,
  type SavedCheckpoint,
} from './checkpoint-store.js';
import {
  comparePosition,
  ContainerLog,
  DEFAULT_INGEST_LIMITS,
  type CutBatch,
  type DropReason,
  type EntryBase,
  type IngestLimits,
} from './container-log.js';
import type { LinePosition } from './joiner.js';
import { compileEligibility, type ContainerTarget, type EligibilityConfig } from './eligibility.js';
import type { LogRequest, PodLogKubeAccess } from './kube-access.js';
import { LineSplitter } from './line-splitter.js';
import { encodeLogMessage } from './log-entry-encoder.js';
import { lineTimeToSinceTime } from './line-time.js';
import { errorCode, runReflector as runPodReflector } from '../../watch/reflector.js';
import {
  misreadByStatus,
  misreadRecoveryFrom,
  misreadThrough,
  previousReadEnd,
  previousUnfinished,
  type RestartTimes,
} from './restart.js';
import { StreamScheduler, type SessionOutcome } from './stream-scheduler.js';
import { WorkloadResolver, type Workload } from './workload.js';

export const MAX_CONCURRENT_STREAMS = 200;

export interface PodLogSourceOptions {
  /** collect.logs (normalised): rules, excludes, tail_lines, follow, checkpoint_dir. */
  readonly logs: EligibilityConfig & { readonly checkpoint_dir: string };
  readonly identity: { readonly clusterId: string; readonly agentId: string };
  readonly maxConcurrentStreams?: number;
  readonly ingest?: IngestLimits;
  /** A stream yields its slot after this long while others wait (default 30 s). */
  readonly fairnessSliceMs?: number;
  /**
   * A stream that delivers no bytes for this long is closed and reopened from its position
   * (default 5 min): a half-open connection, dropped by a proxy without a FIN, would otherwise
   * hold its slot and deliver nothing forever.
   */
  readonly streamIdleTimeoutMs?: number;
  /** How often batches are cut and enqueued (default 250 ms). */
  readonly flushIntervalMs?: number;
  /** Checkpoints of a deleted pod are removed this long after the deletion (default 10 min). */
  readonly checkpointGraceMs?: number;
  readonly maxBatchEntries?: number;
  readonly maxBatchBytes?: number;
}

/** Typed self-metric handles; main.ts binds them to prom-client. */
export interface PodLogCounters {
  linesRead(count: number): void;
  bytesRead(count: number): void;
  dropped(reason: DropReason, count: number): void;
  /** Lines cut to max_line_bytes (forwarded, flagged truncated). */
  truncated(count: number): void;
  reconnects(count: number): void;
  streamErrors(kind: string): void;
  /**
   * A follow stream the server ended with nothing new (only lines we had, or none) reopens
   * after backoff; `state` is the container's (`running`, `waiting`, `terminated`, `unknown`).
   */
  streamBackoffs(state: ContainerStateKind): void;
}

export type ContainerStateKind = 'running' | 'waiting' | 'terminated' | 'unknown';

export const noopPodLogCounters: PodLogCounters = {
  linesRead: () => undefined,
  bytesRead: () => undefined,
  dropped: () => undefined,
  truncated: () => undefined,
  reconnects: () => undefined,
  streamErrors: () => undefined,
  streamBackoffs: () => undefined,
};

export interface PodLogSourceDeps {
  readonly logger: Logger;
  readonly clock: Clock;
  readonly sink: Sink;
  /** The buffer's release feed (DurableBuffer.onRelease); without it, enqueue counts as release. */
  readonly releases?: { onRelease(listener: ReleaseListener): () => void };
  readonly kube: PodLogKubeAccess;
  readonly counters?: PodLogCounters;
}

/** Gauges read at scrape time. */
export interface PodLogSourceStats {
  readonly activeStreams: number;
  readonly queuedContainers: number;
  /** The most streams ever open at once. */
  readonly maxActiveStreams: number;
  /** Batches enqueued and not yet released, over all containers: the checkpoint lag. */
  readonly unreleasedBatches: number;
}

export interface PodLogSource extends Source, AsyncDisposable {
  stats(): PodLogSourceStats;
  /** Applies new ingest limits (from a gateway ConfigUpdate) to every stream, open or new. */
  setIngestLimits(next: IngestLimits): void;
}

const DROPPED_LABELS = [
  'pod-template-hash',
  'controller-revision-hash',
  'batch.kubernetes.io/job-name',
];
const SWEEP_INTERVAL_MS = 60_000;
/** How long a full batch waits for others before the flush that enqueues it. */
const READY_FLUSH_DELAY_MS = 20;

interface Desired {
  pod: V1Pod;
  target: ContainerTarget;
}

/** What one connection read, and how it ended. */
interface ConnectionRead {
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

/** The pod fields the source reads, with blanks for what is missing. */
function podIdentity(pod: V1Pod) {
  const { uid = '', name = '', namespace = '', labels = {} } = pod.metadata ?? {};
  const exported = Object.fromEntries(
    Object.entries(labels).filter(([key]) => !DROPPED_LABELS.includes(key)),
  );
  return { uid, name, namespace, labels: exported, nodeName: pod.spec?.nodeName ?? '' };
}

function restartCountOf(pod: V1Pod, container: string): number {
  return pod.status?.containerStatuses?.find((s) => s.name === container)?.restartCount ?? 0;
}

/** A status time as whole seconds; the watch hands times over as strings, not Dates. */
function secondOf(time: Date | string | undefined): number | undefined {
  const ms = time === undefined ? NaN : new Date(time).getTime();
  return Number.isFinite(ms) ? Math.floor(ms / 1000) : undefined;
}

/** When the previous instance finished and the current one started, by the pod status. */
function restartTimesOf(pod: V1Pod, container: string): RestartTimes {
  const status = pod.status?.containerStatuses?.find((s) => s.name === container);
  const { running, terminated } = status?.state ?? {};
  return {
    previousFinishedSec: secondOf(status?.lastState?.terminated?.finishedAt),
    startedSec: secondOf(running?.startedAt ?? terminated?.startedAt),
  };
}

/** The container's state by the pod status, for the log line and the metric of a quiet stream. */
function containerStateOf(
  pod: V1Pod,
  container: string,
): { kind: ContainerStateKind; text: string } {
  const state = pod.status?.containerStatuses?.find((s) => s.name === container)?.state;
  if (state?.waiting) return { kind: 'waiting', text: `waiting: ${state.waiting.reason ?? ''}` };
  if (state?.terminated) {
    return { kind: 'terminated', text: `terminated: ${state.terminated.reason ?? ''}` };
  }
  if (state?.running) return { kind: 'running', text: 'running' };
  return { kind: 'unknown', text: 'unknown' };
}

/** sinceTime (second precision) to resume, tailLines on first sight, nothing for a new instance. */
function resumeOrTail(
  resumeAfter: LinePosition | undefined,
  tail: boolean,
  tailLines: number,
): { sinceTime?: Date; tailLines?: number } {
  if (resumeAfter) return { sinceTime: lineTimeToSinceTime(resumeAfter) };
  return tail ? { tailLines } : {};
}

/** Creates the pod log source; nothing runs until start(). */
export function createPodLogSource(
  options: PodLogSourceOptions,
  deps: PodLogSourceDeps,
): PodLogSource {
  const logger = deps.logger.child({ component: 'pod-logs' });
  const counters = deps.counters ?? noopPodLogCounters;
  const { clock } = deps;
  let limits = options.ingest ?? DEFAULT_INGEST_LIMITS;
  const eligible = compileEligibility(options.logs);
  const desired = new Map<string, Desired>();
  const logs = new Map<string, ContainerLog>();
  const byMessageId = new Map<string, ContainerLog>();
  const metaOf = new Map<ContainerLog, InstanceMeta>();
  const firstRestart = new Map<string, number>();
  const tailPending = new WeakSet<ContainerLog>();
  /** Previous instances read to their end in this process: never read again. */
  const readToEnd = new WeakSet<ContainerLog>();
  /** Read to their end, to be marked finished in the store once every batch is released. */
  const finishPending = new Set<ContainerLog>();
  /** Where the last connection that delivered lines into each log started (its read position). */
  const lastDeliveringFrom = new WeakMap<ContainerLog, { from: LinePosition | undefined }>();
  /** Previous instances already checked for a misread of the next one (issue #5). */
  const misreadChecked = new WeakSet<ContainerLog>();
  /** New instances that skip a misread: their first connection reports what it skipped. */
  const misreadSkips = new WeakSet<ContainerLog>();
  /** Containers whose follow stream ended with nothing new, by the state last logged. */
  const quiet = new Map<string, string>();
  /** The open connection of each container's session, with the restart count it serves. */
  const connections = new Map<string, { restartCount: number; close(): void }>();
  const workloads = new Map<string, Workload>();
  const resolver = new WorkloadResolver(deps.kube.owners, () => clock.now());
  const lifetime = new AbortController();
  let store: CheckpointStore = memoryOnlyCheckpoints;
  let scheduler: StreamScheduler | undefined;
  let listed = false;
  let forbidden = false;
  let flushTimer: NodeJS.Timeout | undefined;
  let sweepTimer: NodeJS.Timeout | undefined;
  let flushAllQueued = false;
  /** Checkpoints of pods absent from the first lists were swept (once per start). */
  let absentSwept = false;
  let readyFlushTimer: NodeJS.Timeout | undefined;
  /** Set by close() before its final flush: nothing flushes after it. */
  let closing = false;
  /** Lines and bytes read since the last flush: counted there, not once per chunk. */
  let pendingLines = 0;
  let pendingBytes = 0;
  let unsubscribe: (() => void) | undefined;
  let closed: Promise<void> | undefined;
  let runners: Promise<unknown>[] = [];

  const keyOf = (pod: V1Pod, container: string): string =>
    `${pod.metadata?.uid ?? ''}/${container}`;

  function reconcilePod(pod: V1Pod): void {
    const uid = pod.metadata?.uid ?? '';
    const targets = eligible(pod);
    const keep = new Set<string>();
    for (const target of targets) {
      const key = keyOf(pod, target.container);
      keep.add(key);
      desired.set(key, { pod, target });
      scheduler?.want(key);
      // A restart ends the session's connection: it comes back to finish the previous instance
      // and start the new one. (The kubelet ends a follow stream when its container stops; this
      // covers a stream that outlives it.)
      const open = connections.get(key);
      if (open && restartCountOf(pod, target.container) > open.restartCount) open.close();
    }
    for (const key of [...desired.keys()]) {
      if (key.startsWith(`${uid}/`) && !keep.has(key)) {
        desired.delete(key);
        scheduler?.unwant(key);
      }
    }
  }

  function removePod(pod: V1Pod): void {
    const uid = pod.metadata?.uid ?? '';
    for (const key of [...desired.keys()]) {
      if (!key.startsWith(`${uid}/`)) continue;
      desired.delete(key);
      scheduler?.unwant(key);
    }
    store.markPodDeleted(uid, clock.now());
  }

  function entryBase(pod: V1Pod, container: string): EntryBase {
    const id = podIdentity(pod);
    const workload = workloads.get(id.uid) ?? { name: '', kind: '' };
    return {
      podName: id.name,
      namespace: id.namespace,
      container,
      labels: id.labels,
      workload: workload.name,
      workloadKind: workload.kind,
      nodeName: id.nodeName,
    };
  }

  const instanceKey = (instance: ContainerInstance): string =>
    `${instance.podUid}/${instance.container}/${String(instance.restartCount)}`;

  function containerLogFor(
    pod: V1Pod,
    container: string,
    restartCount: number,
    loaded?: SavedCheckpoint,
  ): { log: ContainerLog; tail: boolean } {
    const id = podIdentity(pod);
    const instance: ContainerInstance = { podUid: id.uid, container, restartCount };
    const key = instanceKey(instance);
    const existing = logs.get(key);
    // The tail applies until a connection of the instance has read something.
    if (existing) return { log: existing, tail: tailPending.has(existing) };
    const saved = loaded ?? store.load(instance);
    const log = new ContainerLog({
      instance,
      base: entryBase(pod, container),
      saved,
      limits,
      maxBatchEntries: options.maxBatchEntries ?? 500,
      maxBatchBytes: options.maxBatchBytes ?? 512 * 1024,
      nowMs: clock.now(),
      onDrop: (reason) => {
        counters.dropped(reason, 1);
      },
      onTruncated: () => {
        counters.truncated(1);
      },
    });
    logs.set(key, log);
    metaOf.set(log, { namespace: id.namespace, podName: id.name });
    for (const intent of saved.intents) byMessageId.set(intent.messageId, log);
    const containerKey = `${instance.podUid}/${container}`;
    const first = firstRestart.get(containerKey);
    if (first === undefined) firstRestart.set(containerKey, instance.restartCount);
    // Tail only on first sight without a checkpoint; a new instance after a restart is read
    // from its beginning.
    const tail = saved.position === undefined && saved.intents.length === 0 && first === undefined;
    if (tail) tailPending.add(log);
    return { log, tail };
  }

  async function runSession(key: string, signal: AbortSignal): Promise<SessionOutcome> {
    const wanted = desired.get(key);
    if (!wanted) return 'done';
    const { pod, target } = wanted;
    const id = podIdentity(pod);
    if (!workloads.has(id.uid)) workloads.set(id.uid, await resolver.resolve(pod));
    const restartCount = restartCountOf(pod, target.container);
    const previous = await finishPrevious(key, wanted, restartCount, signal);
    if (previous) return previous;
    const { log, tail } = containerLogFor(pod, target.container, restartCount);
    const read = await readConnection(
      { key, log, restartCount },
      {
        namespace: id.namespace,
        pod: id.name,
        container: target.container,
        follow: target.follow,
        ...resumeOrTail(log.resumeAfter(), tail, target.tailLines),
      },
      signal,
    );
    if (misreadSkips.delete(log)) {
      logger.debug(
        { key, restartCount, skipped: log.skippedOnConnection() },
        'misread lines skipped',
      );
    }
    return afterRead(key, wanted, read, signal);
  }

  /** What the session does after its connection ended. */
  function afterRead(
    key: string,
    { pod, target }: Desired,
    read: ConnectionRead,
    signal: AbortSignal,
  ): SessionOutcome {
    if (read.advanced) leaveQuiet(key);
    if (read.failed) {
      if (read.lines === 0) return sessionFailed(read.error, key, signal);
      counters.streamErrors('cut');
      counters.reconnects(1);
      // Cut after it delivered new lines: resume at once from the position. Cut after only
      // lines we had (a stopped container's log sent again): back off, as an ended stream.
      if (!read.advanced) return quietEnd(key, pod, target.container, 'cut');
      logger.debug({ key, err: read.error }, 'log stream cut, resuming');
      return 'again';
    }
    const closedByUs = read.closedByUs || signal.aborted;
    // A read to the end is done; one closed early (preempted, idle) goes on from its position.
    if (!target.follow) return closedByUs ? 'again' : 'done';
    counters.reconnects(1);
    // Ended while following: preempted, idle, kubelet rotation, or the container stopped.
    // Reconnect at once if it produced new lines or was closed on our side. A kubelet ends the
    // follow stream of a container that is not running (back-off, exited) right after sending
    // its log again: only lines we have. Reopening that at once is a tight loop, so it backs off.
    if (read.advanced || closedByUs) return 'again';
    return quietEnd(key, pod, target.container, 'ended');
  }

  /**
   * A follow stream ended or was cut with nothing new: it reopens after backoff, counted each
   * time, logged once per container state (entering the quiet state, or a change of the
   * container's state while in it).
   */
  function quietEnd(
    key: string,
    pod: V1Pod,
    container: string,
    how: 'ended' | 'cut',
  ): SessionOutcome {
    const state = containerStateOf(pod, container);
    counters.streamBackoffs(state.kind);
    const reason = `${how}, container ${state.text}`;
    if (quiet.get(key) !== reason) {
      quiet.set(key, reason);
      logger.info({ key, reason }, 'log stream ended with nothing new: reopening it with backoff');
    }
    return 'retry';
  }

  function leaveQuiet(key: string): void {
    if (!quiet.delete(key)) return;
    logger.info({ key }, 'log stream delivering new lines again');
  }

  /**
   * After a restart, reads the unfinished instance before `restartCount` to its end
   * (`previous=true`, no follow, from its position) under its own identity. Undefined when there
   * is nothing (more) to read; otherwise what the session does next.
   */
  async function finishPrevious(
    key: string,
    { pod, target }: Desired,
    restartCount: number,
    signal: AbortSignal,
  ): Promise<SessionOutcome | undefined> {
    if (restartCount <= 0) return undefined;
    const id = podIdentity(pod);
    const instance = {
      podUid: id.uid,
      container: target.container,
      restartCount: restartCount - 1,
    };
    const existing = logs.get(instanceKey(instance));
    const saved = existing ? { position: undefined, intents: [] } : store.load(instance);
    const inProcess = existing && { readToEnd: readToEnd.has(existing) };
    if (!previousUnfinished(restartCount, { inProcess, saved })) return undefined;
    const { log, tail } = containerLogFor(pod, target.container, instance.restartCount, saved);
    const read = await readConnection(
      { key, log, restartCount },
      {
        namespace: id.namespace,
        pod: id.name,
        container: target.container,
        follow: false,
        previous: true,
        ...resumeOrTail(log.resumeAfter(), tail, target.tailLines),
      },
      signal,
    );
    const code = read.failed ? errorCode(read.error) : undefined;
    const end = previousReadEnd({
      closedByUs: read.closedByUs || signal.aborted,
      lines: read.lines,
      error: read.failed ? read.error : undefined,
      code,
    });
    if (end === 'again') return 'again';
    if (end === 'failed') return sessionFailed(read.error, key, signal);
    if (read.failed) logger.debug({ key, code }, 'no previous instance to finish');
    if (checkMisread(key, { pod, target }, log, read.failed)) return 'again';
    // Batches replayed from intents end here even if the log ended before their recorded end.
    log.endOfLog(clock.now());
    readToEnd.add(log);
    finishPending.add(log);
    requestFlush();
    return undefined;
  }

  /**
   * After the previous instance's read, tells whether lines of the current instance went out
   * under the previous identity (issue #5, see restart.ts). If so, the current instance skips
   * them, and true when the previous instance must be read again from where the misread began:
   * it has lines there that no connection delivered.
   */
  function checkMisread(
    key: string,
    { pod, target }: Desired,
    log: ContainerLog,
    noPrevious: boolean,
  ): boolean {
    // Once per instance: its second read, from where the misread began, is not checked again.
    if (misreadChecked.has(log)) return false;
    misreadChecked.add(log);
    const readThrough = log.resumeAfter();
    if (!readThrough) return false;
    const lastSeen = log.lastSeen();
    if (noPrevious) {
      const verdict = misreadByStatus(readThrough, restartTimesOf(pod, target.container));
      if (verdict === 'ambiguous') logger.debug({ key, readThrough }, 'misread undecided');
      if (verdict !== 'misread') return false;
    } else if (!misreadThrough({ readThrough, lastSeen })) return false;
    skipInCurrent(pod, target.container, log.instance.restartCount + 1, readThrough);
    const from = noPrevious
      ? undefined
      : misreadRecoveryFrom({
          misreadFrom: lastDeliveringFrom.get(log)?.from,
          readThrough,
          lastSeen,
        });
    logger.debug(
      { key, restartCount: log.instance.restartCount, skipThrough: readThrough, rereadFrom: from },
      'previous instance misread the next one',
    );
    if (!from) return false;
    log.rewind(from);
    return true;
  }

  /** The instance `restartCount` skips lines through `through`, here and in its checkpoint. */
  function skipInCurrent(
    pod: V1Pod,
    container: string,
    restartCount: number,
    through: LinePosition,
  ): void {
    const id = podIdentity(pod);
    const instance: ContainerInstance = { podUid: id.uid, container, restartCount };
    if (logs.has(instanceKey(instance))) return;
    const saved = store.load(instance);
    const position =
      saved.position && comparePosition(saved.position, through) > 0 ? saved.position : through;
    const { log } = containerLogFor(pod, container, restartCount, { ...saved, position });
    misreadSkips.add(log);
    // Stored, so a restart of the collector keeps the skip.
    const meta = { namespace: id.namespace, podName: id.name };
    try {
      store.advance([{ instance, meta, position, released: [] }]);
    } catch (err: unknown) {
      logger.error({ err }, 'checkpoint write failed');
    }
  }

  /** One log connection into `log`, closed early by the idle watchdog or a restart. */
  async function readConnection(
    { key, log, restartCount }: { key: string; log: ContainerLog; restartCount: number },
    request: LogRequest,
    signal: AbortSignal,
  ): Promise<ConnectionRead> {
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
    connections.set(key, {
      restartCount,
      close: () => {
        read.closedByUs = true;
        connection.abort();
      },
    });
    const watchdog = watchIdle(read, connection, connectionSignal);
    try {
      await readBody(request, log, read, connectionSignal);
    } catch (err: unknown) {
      // Closed on our side (preempted, idle, stopping): an error here is that close.
      if (!connectionSignal.aborted) {
        read.failed = true;
        read.error = err;
      }
    } finally {
      connections.delete(key);
      if (read.lines > 0) tailPending.delete(log);
      read.advanced = log.resumeAfter() !== from;
      if (read.advanced) lastDeliveringFrom.set(log, { from });
      connection.abort();
      await watchdog;
      log.flushJoiner(clock.now(), false);
      requestFlush();
    }
    return read;
  }

  /** Closes the connection when no byte arrived for streamIdleTimeoutMs; ends with it. */
  async function watchIdle(
    read: { lastByteAtMs: number; closedByUs: boolean },
    connection: AbortController,
    connectionSignal: AbortSignal,
  ): Promise<void> {
    const idleMs = Math.max(1, options.streamIdleTimeoutMs ?? 5 * 60_000);
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
    request: LogRequest,
    log: ContainerLog,
    read: { lines: number; lastByteAtMs: number },
    connectionSignal: AbortSignal,
  ): Promise<void> {
    const splitter = new LineSplitter(limits.maxLineBytes > 0 ? limits.maxLineBytes + 64 : 0);
    // Runs once per chunk, synchronously, as the socket delivers it: a followed log comes in
    // 100-200 byte chunks, so nothing here may cost more than it must (no promise, no stream).
    let now = clock.now();
    const onLine = (text: string, cut: boolean): void => {
      log.accept(text, cut, now);
    };
    const onChunk = (chunk: Buffer): void => {
      now = clock.now();
      read.lastByteAtMs = now;
      pendingBytes += chunk.length;
      const lines = splitter.push(chunk, onLine);
      // Counted as read, so a stream that stays open for days still shows its lines.
      read.lines += lines;
      pendingLines += lines;
      if (log.hasFullBatch()) requestFlush('ready');
    };
    await deps.kube.logs.read(request, connectionSignal, onChunk);
    // An unterminated last line is whole only if the server ended the stream. On our abort
    // it may be a fragment: drop it, the next connection reads the line again.
    const last = splitter.end();
    if (last && !connectionSignal.aborted) {
      log.accept(last.text, last.cut, clock.now());
      read.lines++;
      pendingLines++;
    }
  }

  function sessionFailed(err: unknown, key: string, signal: AbortSignal): SessionOutcome {
    if (signal.aborted) return 'again';
    const code = errorCode(err);
    counters.streamErrors(code === undefined ? 'io' : String(code));
    if (code === 404) return 'done';
    const level = code === 403 ? 'error' : 'debug';
    logger[level]({ key, code, err }, 'log stream failed');
    return 'retry';
  }

  /**
   * Flushes soon (setImmediate): `ready` enqueues only full batches (a stream filled one), `all`
   * also cuts every partial batch (a connection ended: its lines go out now, not at the timer).
   */
  function requestFlush(scope: 'ready' | 'all' = 'all'): void {
    if (closing) return;
    if (scope === 'all') {
      if (flushAllQueued) return;
      flushAllQueued = true;
      // Sooner than a pending `ready` flush: that one is dropped, this one takes its batches.
      clearTimeout(readyFlushTimer);
      readyFlushTimer = undefined;
      setImmediate(() => {
        flushAllQueued = false;
        if (!closing) flush('all');
      });
      return;
    }
    if (flushAllQueued || readyFlushTimer !== undefined) return;
    // Full batches wait a moment for others, so that a busy source commits its intents (and
    // its checkpoints) a few batches at a time rather than once per batch.
    readyFlushTimer = setTimeout(() => {
      readyFlushTimer = undefined;
      if (!closing) flush('ready');
    }, READY_FLUSH_DELAY_MS);
  }

  /**
   * Cuts batches, records their intents, enqueues them; settles empty ones at once. `idle` (the
   * timer) also emits records the joiner held long enough and cuts every partial batch, `all`
   * cuts every partial batch, `ready` takes only full ones: a busy stream filling batches does
   * not cut every other container's batch short each time.
   */
  function flush(mode: 'idle' | 'all' | 'ready'): void {
    const now = clock.now();
    counters.linesRead(pendingLines);
    counters.bytesRead(pendingBytes);
    pendingLines = 0;
    pendingBytes = 0;
    const cut: { log: ContainerLog; batch: CutBatch }[] = [];
    const touched = new Set<ContainerLog>();
    for (const log of logs.values()) {
      if (mode === 'idle') log.flushJoiner(now, true);
      for (const batch of log.takeBatches(mode !== 'ready')) cut.push({ log, batch });
      touched.add(log);
    }
    if (cut.length > 0) {
      store.recordIntents(
        cut.map(({ log, batch }) => ({
          instance: log.instance,
          meta: metaOf.get(log) ?? { namespace: '', podName: '' },
          intent: { messageId: batch.messageId, end: batch.end },
        })),
      );
    }
    for (const { log, batch } of cut) {
      byMessageId.set(batch.messageId, log);
      deps.sink.enqueue({ id: batch.messageId, kind: 'log', payload: encode(batch, now) });
      if (!deps.releases) log.markReleased(batch.messageId);
    }
    settle(touched);
  }

  function encode(batch: CutBatch, nowMs: number): Uint8Array {
    return encodeLogMessage(
      {
        messageId: batch.messageId,
        clusterId: options.identity.clusterId,
        agentId: options.identity.agentId,
        // The first line's time, as the Go agent puts the line's time (and the same on a
        // replay); the flush time only for lines without a timestamp.
        timestampMs: batch.firstTimeMs > 0 ? batch.firstTimeMs : nowMs,
      },
      batch.entries,
    );
  }

  /**
   * Marks batches released. Their checkpoints move at the next flush (within the flush
   * interval), one SQLite commit for every release since the last one instead of a commit per
   * gateway ack: until then the intents still name those batches, so a crash in between replays
   * them under the same ids, which the gateway drops.
   */
  function onRelease(ids: readonly string[]): void {
    for (const id of ids) byMessageId.get(id)?.markReleased(id);
  }

  function settle(touched: Iterable<ContainerLog>): void {
    const moves = [];
    for (const log of touched) {
      const moved = log.settle();
      if (!moved) continue;
      for (const id of moved.released) byMessageId.delete(id);
      moves.push({
        instance: log.instance,
        meta: metaOf.get(log) ?? { namespace: '', podName: '' },
        ...moved,
      });
    }
    try {
      if (moves.length > 0) store.advance(moves);
      // A previous instance read to its end is finished once all of it is released.
      for (const log of finishPending) {
        if (log.outstanding() > 0) continue;
        store.markFinished(log.instance, metaOf.get(log) ?? { namespace: '', podName: '' });
        finishPending.delete(log);
      }
    } catch (err: unknown) {
      // The batches are delivered; a lost checkpoint write only means a deduplicated replay.
      logger.error({ err }, 'checkpoint write failed');
    }
  }

  function sweep(): void {
    const now = clock.now();
    store.sweep(now - (options.checkpointGraceMs ?? 10 * 60_000));
    const live = new Set([...desired.values()].map((d) => d.pod.metadata?.uid ?? ''));
    for (const [key, log] of logs) {
      if (!live.has(log.instance.podUid) && log.outstanding() === 0) {
        logs.delete(key);
        metaOf.delete(log);
      }
    }
  }

  /**
   * Once every watched namespace has been listed: checkpoints of pods in none of the lists
   * belong to pods deleted while the collector was down (the watch never reports those). They
   * are removed at once: their logs can no longer be read.
   */
  function sweepAbsentPods(podsByNamespace: ReadonlyMap<string, ReadonlySet<string>>): void {
    if (absentSwept || !namespacesToWatch().every((ns) => podsByNamespace.has(ns))) return;
    absentSwept = true;
    const live = new Set([...podsByNamespace.values()].flatMap((uids) => [...uids]));
    try {
      const absent = store.podUids().filter((uid) => !live.has(uid));
      if (absent.length === 0) return;
      const rows = store.removePods(absent);
      logger.info({ pods: absent.length, rows }, 'checkpoints of pods deleted while down removed');
    } catch (err: unknown) {
      logger.error({ err }, 'checkpoint sweep failed');
    }
  }

  function namespacesToWatch(): string[] {
    const namespaces = options.logs.rules.map((rule) => rule.namespace.trim());
    return namespaces.length === 0 || namespaces.includes('') ? [''] : [...new Set(namespaces)];
  }

  return {
    name: 'pod-logs',
    up: () => listed && !forbidden,
    setIngestLimits(next) {
      limits = next;
      const now = clock.now();
      for (const log of logs.values()) log.setLimits(next, now);
      logger.info({ maxLineBytes: next.maxLineBytes, rate: next.rate }, 'ingest limits updated');
    },
    stats: () => {
      const s = scheduler?.stats() ?? { active: 0, queued: 0, maxActive: 0 };
      let unreleased = 0;
      for (const log of logs.values()) unreleased += log.outstanding();
      return {
        activeStreams: s.active,
        queuedContainers: s.queued,
        maxActiveStreams: s.maxActive,
        unreleasedBatches: unreleased,
      };
    },
    start(signal: AbortSignal): Promise<void> {
      const stop = (): void => {
        lifetime.abort();
      };
      if (signal.aborted) stop();
      else signal.addEventListener('abort', stop, { once: true });
      if (options.logs.checkpoint_dir !== '') {
        mkdirSync(options.logs.checkpoint_dir, { recursive: true, mode: 0o750 });
        store = openCheckpointStore(
          join(options.logs.checkpoint_dir, 'pod-logs.db'),
          () => clock.now(),
          logger,
        );
      }
      unsubscribe = deps.releases?.onRelease(onRelease);
      scheduler = new StreamScheduler(
        {
          maxConcurrent: options.maxConcurrentStreams ?? MAX_CONCURRENT_STREAMS,
          sliceMs: options.fairnessSliceMs ?? 30_000,
          initialBackoffMs: 1_000,
          maxBackoffMs: 30_000,
        },
        { clock, run: runSession, signal: lifetime.signal },
      );
      const podsByNamespace = new Map<string, Set<string>>();
      runners = namespacesToWatch().map((namespace) =>
        runPodReflector(
          deps.kube.listWatch(namespace),
          {
            replace: (pods) => {
              listed = true;
              forbidden = false;
              const seen = new Set(pods.map((p) => p.metadata?.uid ?? ''));
              for (const uid of podsByNamespace.get(namespace) ?? []) {
                if (!seen.has(uid)) {
                  const gone = [...desired.values()].find((d) => d.pod.metadata?.uid === uid);
                  if (gone) removePod(gone.pod);
                }
              }
              podsByNamespace.set(namespace, seen);
              for (const pod of pods) reconcilePod(pod);
              sweepAbsentPods(podsByNamespace);
            },
            upsert: (pod) => {
              podsByNamespace.get(namespace)?.add(pod.metadata?.uid ?? '');
              reconcilePod(pod);
            },
            remove: removePod,
            forbidden: (err) => {
              forbidden = true;
              logger.error({ err, namespace }, 'pod list/watch forbidden: check the ClusterRole');
            },
          },
          { clock, logger, signal: lifetime.signal },
        ),
      );
      flushTimer = setInterval(() => {
        flush('idle');
        scheduler?.rebalance();
      }, options.flushIntervalMs ?? 250);
      flushTimer.unref();
      sweepTimer = setInterval(sweep, SWEEP_INTERVAL_MS);
      sweepTimer.unref();
      return Promise.resolve();
    },
    close(): Promise<void> {
      closed ??= (async () => {
        lifetime.abort();
        clearInterval(flushTimer);
        clearInterval(sweepTimer);
        await Promise.allSettled(runners);
        // Let aborted sessions finish their last lines, then hand everything to the sink.
        await new Promise((resolve) => setImmediate(resolve));
        for (const log of logs.values()) log.flushJoiner(clock.now(), false);
        closing = true;
        clearTimeout(readyFlushTimer);
        flush('all');
        unsubscribe?.();
        store.close();
      })();
      return closed;
    },
    [Symbol.asyncDispose]() {
      return this.close();
    },
  };
}
