// The pod log source: a pod reflector feeds the PodReconciler (pod-reconciler.ts: eligibility,
// one ContainerSession per eligible container, the sweeps); the scheduler runs the sessions
// (container-session.ts: connections, restarts, backoff); each container instance's
// ContainerLog (kept in the LogRegistry) turns lines into batches, and the BatchFlusher hands
// batches to the Sink under deterministic ids. Checkpoints advance only on the buffer's release
// of a batch (see docs/pod-logs.md). This file wires them together: the timers, start and close.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { Clock } from '../../../shared/clock.js';
import type { ReleaseListener } from '../../buffer/types.js';
import type { Sink, Source } from '../source.js';
import { BatchFlusher } from './batch-flusher.js';
import {
  memoryOnlyCheckpoints,
  openCheckpointStore,
  type CheckpointStore,
} from './checkpoint-store.js';
import type { ConnectionDeps } from './connection-read.js';
import type { SessionContext } from './container-session.js';
import { DEFAULT_INGEST_LIMITS, type DropReason, type IngestLimits } from './container-log.js';
import { compileEligibility, type EligibilityConfig } from './eligibility.js';
import type { PodLogKubeAccess } from './kube-access.js';
import { LogRegistry } from './log-registry.js';
import { podIdentity, type ContainerStateKind } from './pod-fields.js';
import { namespacesToWatch, PodReconciler } from './pod-reconciler.js';
import { reflectorFeed } from '../../watch/reflector.js';
import { StreamScheduler } from './stream-scheduler.js';
import { WorkloadResolver, type Workload } from './workload.js';

export type { ContainerStateKind } from './pod-fields.js';

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

const SWEEP_INTERVAL_MS = 60_000;

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
  const workloads = new Map<string, Workload>();
  const resolver = new WorkloadResolver(deps.kube.owners, () => clock.now());
  const lifetime = new AbortController();
  let store: CheckpointStore = memoryOnlyCheckpoints;
  let scheduler: StreamScheduler | undefined;
  let listed = false;
  let forbidden = false;
  let flushTimer: NodeJS.Timeout | undefined;
  let started = false;
  let sweepTimer: NodeJS.Timeout | undefined;
  let unsubscribe: (() => void) | undefined;
  let closed: Promise<void> | undefined;
  let runners: Promise<unknown>[] = [];

  const registry = new LogRegistry({
    clock,
    store: () => store,
    limits: () => limits,
    maxBatchEntries: options.maxBatchEntries ?? 500,
    maxBatchBytes: options.maxBatchBytes ?? 512 * 1024,
    workloadOf: (uid) => workloads.get(uid),
    dropped: (reason: DropReason) => {
      counters.dropped(reason, 1);
    },
    truncated: () => {
      counters.truncated(1);
    },
  });
  const flusher = new BatchFlusher({
    logger,
    clock,
    sink: deps.sink,
    registry,
    store: () => store,
    identity: options.identity,
    releaseFeed: deps.releases !== undefined,
    linesRead: (count) => {
      counters.linesRead(count);
    },
    bytesRead: (count) => {
      counters.bytesRead(count);
    },
  });
  /**
   * The idle flush (and the scheduler's fairness check) every flushIntervalMs, only while a tick
   * has something to do: lines or bytes read and not yet counted, a record the joiner holds, a
   * partial batch to cut, a release to settle (BatchFlusher.hasPending), or a container waiting
   * for a slot (rebalance). A tick that leaves nothing pending stops the timer; what creates work
   * wakes it: a chunk read (countRead), a release of one of our batches, a container queued.
   * Open streams that read nothing cost no wake-up (issue #19: 200 idle streams were four walks
   * of 200 logs a second).
   */
  function armFlushTimer(): void {
    if (flushTimer !== undefined || !started || lifetime.signal.aborted) return;
    flushTimer = setInterval(() => {
      flusher.flush('idle');
      scheduler?.rebalance();
      if ((scheduler?.stats().queued ?? 0) === 0 && !flusher.hasPending()) {
        clearInterval(flushTimer);
        flushTimer = undefined;
      }
    }, options.flushIntervalMs ?? 250);
    flushTimer.unref();
  }
  const connection: ConnectionDeps = {
    clock,
    logs: deps.kube.logs,
    idleMs: options.streamIdleTimeoutMs ?? 5 * 60_000,
    get maxLineBytes() {
      return limits.maxLineBytes;
    },
    countRead: (lines, bytes) => {
      flusher.countRead(lines, bytes);
      armFlushTimer();
    },
    requestFlush: (scope) => {
      flusher.request(scope);
    },
  };
  const context: SessionContext = {
    logger,
    clock,
    registry,
    store: () => store,
    connection,
    resolveWorkload: async (pod) => {
      const { uid } = podIdentity(pod);
      if (!workloads.has(uid)) workloads.set(uid, await resolver.resolve(pod));
    },
    counters,
  };
  const namespaces = namespacesToWatch(options.logs.rules);
  const reconciler = new PodReconciler({
    logger,
    clock,
    eligible,
    context,
    registry,
    store: () => store,
    streams: () => scheduler,
    namespaces,
    checkpointGraceMs: options.checkpointGraceMs ?? 10 * 60_000,
  });

  return {
    name: 'pod-logs',
    up: () => listed && !forbidden,
    setIngestLimits(next) {
      limits = next;
      registry.setLimits(next, clock.now());
      logger.info({ maxLineBytes: next.maxLineBytes, rate: next.rate }, 'ingest limits updated');
    },
    stats: () => {
      const s = scheduler?.stats() ?? { active: 0, queued: 0, maxActive: 0 };
      return {
        activeStreams: s.active,
        queuedContainers: s.queued,
        maxActiveStreams: s.maxActive,
        unreleasedBatches: registry.unreleased(),
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
      unsubscribe = deps.releases?.onRelease((ids) => {
        if (registry.release(ids)) armFlushTimer();
      });
      scheduler = new StreamScheduler(
        {
          maxConcurrent: options.maxConcurrentStreams ?? MAX_CONCURRENT_STREAMS,
          sliceMs: options.fairnessSliceMs ?? 30_000,
          initialBackoffMs: 1_000,
          maxBackoffMs: 30_000,
        },
        {
          clock,
          run: (key, sessionSignal) =>
            reconciler.session(key)?.run(sessionSignal) ?? Promise.resolve('done'),
          signal: lifetime.signal,
          queued: () => {
            armFlushTimer();
          },
        },
      );
      runners = namespaces.map((namespace) =>
        // The collector's shared pod watch when it has one (kube-access.ts), else one of its own.
        (
          deps.kube.pods?.(namespace) ??
          reflectorFeed(deps.kube.listWatch(namespace), { clock, logger })
        ).run(
          {
            replace: (pods) => {
              listed = true;
              forbidden = false;
              reconciler.replace(namespace, pods);
            },
            upsert: (pod) => {
              reconciler.upsert(namespace, pod);
            },
            remove: (pod) => {
              reconciler.remove(pod);
            },
            forbidden: (err) => {
              forbidden = true;
              logger.error({ err, namespace }, 'pod list/watch forbidden: check the ClusterRole');
            },
          },
          lifetime.signal,
        ),
      );
      started = true;
      armFlushTimer();
      sweepTimer = setInterval(() => {
        reconciler.sweep();
      }, SWEEP_INTERVAL_MS);
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
        for (const { log } of registry.values()) log.flushJoiner(clock.now(), false);
        flusher.close();
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
