// The session of one container (`<pod uid>/<container>`): what the scheduler runs for it, one
// connection at a time. A run finishes the previous instance after a restart (and checks it for
// a misread of the next one), then reads the current instance, and says what comes next: again
// at once, again after backoff, or done. The session owns the container's state between runs:
// the pod and target it should read, its open connection, and whether its stream is quiet (ended
// with nothing new, so it reopens with backoff).
import type { V1Pod } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { Clock } from '../../../shared/clock.js';
import type { CheckpointStore, ContainerInstance } from './checkpoint-store.js';
import { comparePosition } from './container-log.js';
import { readLogConnection, type ConnectionDeps, type ConnectionRead } from './connection-read.js';
import type { ContainerTarget } from './eligibility.js';
import type { LinePosition } from './joiner.js';
import type { LogRequest } from './kube-access.js';
import type { LogRegistry, TrackedLog } from './log-registry.js';
import {
  containerStateOf,
  podIdentity,
  restartCountOf,
  restartTimesOf,
  resumeOrTail,
  type ContainerStateKind,
} from './pod-fields.js';
import { errorCode } from '../../watch/reflector.js';
import {
  misreadByStatus,
  misreadRecoveryFrom,
  misreadThrough,
  previousReadEnd,
  previousUnfinished,
} from './restart.js';
import type { SessionOutcome } from './stream-scheduler.js';

/** What a session should read: the pod as last seen, and the container's target. */
export interface Desired {
  readonly pod: V1Pod;
  readonly target: ContainerTarget;
}

/** What the sessions of a source share. */
export interface SessionContext {
  readonly logger: Logger;
  readonly clock: Clock;
  readonly registry: LogRegistry;
  store(): CheckpointStore;
  /** How connections read (the log reader, idle timeout, counting, flush requests). */
  readonly connection: ConnectionDeps;
  /** Resolves the pod's workload (once per pod) before its first connection. */
  resolveWorkload(pod: V1Pod): Promise<void>;
  readonly counters: {
    reconnects(count: number): void;
    streamErrors(kind: string): void;
    streamBackoffs(state: ContainerStateKind): void;
  };
}

export class ContainerSession {
  readonly key: string;
  readonly #ctx: SessionContext;
  #wanted: Desired | undefined;
  /** The open connection, with the restart count it serves. */
  #connection: { restartCount: number; close(): void } | undefined;
  /** Set while the follow stream ends with nothing new: the reason last logged. */
  #quiet: string | undefined;

  constructor(key: string, ctx: SessionContext) {
    this.key = key;
    this.#ctx = ctx;
  }

  /** What it reads now; undefined once the container is no longer eligible (or its pod gone). */
  get wanted(): Desired | undefined {
    return this.#wanted;
  }

  /** Whether a connection is open. */
  get connected(): boolean {
    return this.#connection !== undefined;
  }

  /**
   * The pod as last seen. A restart ends the open connection: the session comes back to finish
   * the previous instance and start the new one. (The kubelet ends a follow stream when its
   * container stops; this covers a stream that outlives it.)
   */
  want(pod: V1Pod, target: ContainerTarget): void {
    this.#wanted = { pod, target };
    const open = this.#connection;
    if (open && restartCountOf(pod, target.container) > open.restartCount) open.close();
  }

  unwant(): void {
    this.#wanted = undefined;
  }

  /** One run for the scheduler: a connection (two after a restart), then what comes next. */
  async run(signal: AbortSignal): Promise<SessionOutcome> {
    const wanted = this.#wanted;
    if (!wanted) return 'done';
    const { pod, target } = wanted;
    const id = podIdentity(pod);
    await this.#ctx.resolveWorkload(pod);
    const restartCount = restartCountOf(pod, target.container);
    const previous = await this.#finishPrevious(wanted, restartCount, signal);
    if (previous) return previous;
    const { tracked, tail } = this.#ctx.registry.open(pod, target.container, restartCount);
    const read = await this.#read(
      tracked,
      restartCount,
      {
        namespace: id.namespace,
        pod: id.name,
        container: target.container,
        follow: target.follow,
        ...resumeOrTail(tracked.log.resumeAfter(), tail, target.tailLines),
      },
      signal,
    );
    if (tracked.misreadSkip) {
      tracked.misreadSkip = false;
      this.#ctx.logger.debug(
        { key: this.key, restartCount, skipped: tracked.log.skippedOnConnection() },
        'misread lines skipped',
      );
    }
    return this.#afterRead(wanted, read, signal);
  }

  /** What the session does after its connection ended. */
  #afterRead({ pod, target }: Desired, read: ConnectionRead, signal: AbortSignal): SessionOutcome {
    const { counters, logger } = this.#ctx;
    const key = this.key;
    if (read.advanced) this.#leaveQuiet();
    if (read.failed) {
      if (read.lines === 0) return this.#failed(read.error, signal);
      counters.streamErrors('cut');
      counters.reconnects(1);
      // Cut after it delivered new lines: resume at once from the position. Cut after only
      // lines we had (a stopped container's log sent again): back off, as an ended stream.
      if (!read.advanced) return this.#quietEnd(pod, target.container, 'cut');
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
    return this.#quietEnd(pod, target.container, 'ended');
  }

  /**
   * A follow stream ended or was cut with nothing new: it reopens after backoff, counted each
   * time, logged once per container state (entering the quiet state, or a change of the
   * container's state while in it).
   */
  #quietEnd(pod: V1Pod, container: string, how: 'ended' | 'cut'): SessionOutcome {
    const state = containerStateOf(pod, container);
    this.#ctx.counters.streamBackoffs(state.kind);
    const reason = `${how}, container ${state.text}`;
    if (this.#quiet !== reason) {
      this.#quiet = reason;
      this.#ctx.logger.info(
        { key: this.key, reason },
        'log stream ended with nothing new: reopening it with backoff',
      );
    }
    return 'retry';
  }

  #leaveQuiet(): void {
    if (this.#quiet === undefined) return;
    this.#quiet = undefined;
    this.#ctx.logger.info({ key: this.key }, 'log stream delivering new lines again');
  }

  #failed(err: unknown, signal: AbortSignal): SessionOutcome {
    if (signal.aborted) return 'again';
    const code = errorCode(err);
    this.#ctx.counters.streamErrors(code === undefined ? 'io' : String(code));
    if (code === 404) return 'done';
    const level = code === 403 ? 'error' : 'debug';
    this.#ctx.logger[level]({ key: this.key, code, err }, 'log stream failed');
    return 'retry';
  }

  /**
   * After a restart, reads the unfinished instance before `restartCount` to its end
   * (`previous=true`, no follow, from its position) under its own identity. Undefined when there
   * is nothing (more) to read; otherwise what the session does next.
   */
  async #finishPrevious(
    { pod, target }: Desired,
    restartCount: number,
    signal: AbortSignal,
  ): Promise<SessionOutcome | undefined> {
    if (restartCount <= 0) return undefined;
    const { registry, logger } = this.#ctx;
    const id = podIdentity(pod);
    const instance = {
      podUid: id.uid,
      container: target.container,
      restartCount: restartCount - 1,
    };
    const existing = registry.find(instance);
    const saved = existing
      ? { position: undefined, intents: [] }
      : this.#ctx.store().load(instance);
    const inProcess = existing && { readToEnd: existing.readToEnd };
    if (!previousUnfinished(restartCount, { inProcess, saved })) return undefined;
    const { tracked, tail } = registry.open(pod, target.container, instance.restartCount, saved);
    const read = await this.#read(
      tracked,
      restartCount,
      {
        namespace: id.namespace,
        pod: id.name,
        container: target.container,
        follow: false,
        previous: true,
        ...resumeOrTail(tracked.log.resumeAfter(), tail, target.tailLines),
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
    if (end === 'failed') return this.#failed(read.error, signal);
    if (read.failed) logger.debug({ key: this.key, code }, 'no previous instance to finish');
    if (this.#checkMisread({ pod, target }, tracked, read.failed)) return 'again';
    // Batches replayed from intents end here even if the log ended before their recorded end.
    tracked.log.endOfLog(this.#ctx.clock.now());
    registry.readThrough(tracked);
    this.#ctx.connection.requestFlush('all');
    return undefined;
  }

  /**
   * After the previous instance's read, tells whether lines of the current instance went out
   * under the previous identity (issue #5, see restart.ts). If so, the current instance skips
   * them, and true when the previous instance must be read again from where the misread began:
   * it has lines there that no connection delivered.
   */
  #checkMisread({ pod, target }: Desired, tracked: TrackedLog, noPrevious: boolean): boolean {
    // Once per instance: its second read, from where the misread began, is not checked again.
    if (tracked.misreadChecked) return false;
    tracked.misreadChecked = true;
    const { log } = tracked;
    const { logger } = this.#ctx;
    const readThrough = log.resumeAfter();
    if (!readThrough) return false;
    const lastSeen = log.lastSeen();
    if (noPrevious) {
      const verdict = misreadByStatus(readThrough, restartTimesOf(pod, target.container));
      if (verdict === 'ambiguous') {
        logger.debug({ key: this.key, readThrough }, 'misread undecided');
      }
      if (verdict !== 'misread') return false;
    } else if (!misreadThrough({ readThrough, lastSeen })) return false;
    this.#skipInCurrent(pod, target.container, log.instance.restartCount + 1, readThrough);
    const from = noPrevious
      ? undefined
      : misreadRecoveryFrom({
          misreadFrom: tracked.deliveringFrom?.from,
          readThrough,
          lastSeen,
        });
    logger.debug(
      {
        key: this.key,
        restartCount: log.instance.restartCount,
        skipThrough: readThrough,
        rereadFrom: from,
      },
      'previous instance misread the next one',
    );
    if (!from) return false;
    log.rewind(from);
    return true;
  }

  /** The instance `restartCount` skips lines through `through`, here and in its checkpoint. */
  #skipInCurrent(pod: V1Pod, container: string, restartCount: number, through: LinePosition): void {
    const { registry } = this.#ctx;
    const id = podIdentity(pod);
    const instance: ContainerInstance = { podUid: id.uid, container, restartCount };
    if (registry.find(instance)) return;
    const store = this.#ctx.store();
    const saved = store.load(instance);
    const position =
      saved.position && comparePosition(saved.position, through) > 0 ? saved.position : through;
    const { tracked } = registry.open(pod, container, restartCount, { ...saved, position });
    tracked.misreadSkip = true;
    // Stored, so a restart of the collector keeps the skip.
    const meta = { namespace: id.namespace, podName: id.name };
    try {
      store.advance([{ instance, meta, position, released: [] }]);
    } catch (err: unknown) {
      this.#ctx.logger.error({ err }, 'checkpoint write failed');
    }
  }

  /** One log connection into `tracked`, closed early by the idle watchdog or a restart. */
  #read(
    tracked: TrackedLog,
    restartCount: number,
    request: LogRequest,
    signal: AbortSignal,
  ): Promise<ConnectionRead> {
    return readLogConnection({ log: tracked.log, request, signal }, this.#ctx.connection, {
      opened: (close) => {
        this.#connection = { restartCount, close };
      },
      ended: (read, from) => {
        this.#connection = undefined;
        if (read.lines > 0) tracked.tailPending = false;
        if (read.advanced) tracked.deliveringFrom = { from };
      },
    });
  }
}
