// Turns what the container logs read into buffer items: cuts batches, records their intents in
// the checkpoint store, enqueues them under their deterministic ids, and moves checkpoints over
// the batches the buffer released. Flushes run on the source's timer (`idle`), soon after a
// connection ends (`all`), or a moment after a stream filled a batch (`ready`).
import type { Logger } from 'pino';
import type { Clock } from '../../../shared/clock.js';
import type { Sink } from '../source.js';
import type { CheckpointStore } from './checkpoint-store.js';
import type { ContainerLog, CutBatch } from './container-log.js';
import { encodeLogMessage } from './log-entry-encoder.js';
import type { LogRegistry } from './log-registry.js';

/** How long a full batch waits for others before the flush that enqueues it. */
export const READY_FLUSH_DELAY_MS = 20;

export interface BatchFlusherDeps {
  readonly logger: Logger;
  readonly clock: Clock;
  readonly sink: Sink;
  readonly registry: LogRegistry;
  store(): CheckpointStore;
  readonly identity: { readonly clusterId: string; readonly agentId: string };
  /**
   * The buffer reports releases (DurableBuffer.onRelease). Without that feed, an enqueued batch
   * counts as released at once.
   */
  readonly releaseFeed: boolean;
  /** Lines and bytes read since the last flush, counted at each flush. */
  linesRead(count: number): void;
  bytesRead(count: number): void;
}

export type FlushMode = 'idle' | 'all' | 'ready';

export class BatchFlusher {
  readonly #deps: BatchFlusherDeps;
  #allQueued = false;
  #readyTimer: NodeJS.Timeout | undefined;
  /** Set by close() before its final flush: nothing flushes after it. */
  #closing = false;
  /** Lines and bytes read since the last flush: counted there, not once per chunk. */
  #pendingLines = 0;
  #pendingBytes = 0;

  constructor(deps: BatchFlusherDeps) {
    this.#deps = deps;
  }

  /** Lines and bytes a connection read; counted at the next flush. */
  countRead(lines: number, bytes: number): void {
    this.#pendingLines += lines;
    this.#pendingBytes += bytes;
  }

  /** Whether an idle flush has anything to do: read counts to report, or a log's pending work. */
  hasPending(): boolean {
    return this.#pendingLines > 0 || this.#pendingBytes > 0 || this.#deps.registry.hasPending();
  }

  /**
   * Flushes soon (setImmediate): `ready` enqueues only full batches (a stream filled one), `all`
   * also cuts every partial batch (a connection ended: its lines go out now, not at the timer).
   */
  request(scope: 'ready' | 'all' = 'all'): void {
    if (this.#closing) return;
    if (scope === 'all') {
      if (this.#allQueued) return;
      this.#allQueued = true;
      // Sooner than a pending `ready` flush: that one is dropped, this one takes its batches.
      clearTimeout(this.#readyTimer);
      this.#readyTimer = undefined;
      setImmediate(() => {
        this.#allQueued = false;
        if (!this.#closing) this.flush('all');
      });
      return;
    }
    if (this.#allQueued || this.#readyTimer !== undefined) return;
    // Full batches wait a moment for others, so that a busy source commits its intents (and
    // its checkpoints) a few batches at a time rather than once per batch.
    this.#readyTimer = setTimeout(() => {
      this.#readyTimer = undefined;
      if (!this.#closing) this.flush('ready');
    }, READY_FLUSH_DELAY_MS);
  }

  /** The last flush, of everything: nothing flushes after it. */
  close(): void {
    this.#closing = true;
    clearTimeout(this.#readyTimer);
    this.flush('all');
  }

  /**
   * Cuts batches, records their intents, enqueues them; settles empty ones at once. `idle` (the
   * timer) also emits records the joiner held long enough and cuts every partial batch, `all`
   * cuts every partial batch, `ready` takes only full ones: a busy stream filling batches does
   * not cut every other container's batch short each time.
   */
  flush(mode: FlushMode): void {
    const { clock, registry, sink } = this.#deps;
    const now = clock.now();
    this.#deps.linesRead(this.#pendingLines);
    this.#deps.bytesRead(this.#pendingBytes);
    this.#pendingLines = 0;
    this.#pendingBytes = 0;
    const cut: {
      log: ContainerLog;
      batch: CutBatch;
      meta: { namespace: string; podName: string };
    }[] = [];
    for (const { log, meta } of registry.values()) {
      if (mode === 'idle') log.flushJoiner(now, true);
      for (const batch of log.takeBatches(mode !== 'ready')) cut.push({ log, batch, meta });
    }
    if (cut.length > 0) {
      this.#deps.store().recordIntents(
        cut.map(({ log, batch, meta }) => ({
          instance: log.instance,
          meta,
          intent: { messageId: batch.messageId, end: batch.end },
        })),
      );
    }
    for (const { log, batch } of cut) {
      registry.enqueued(batch.messageId, log);
      sink.enqueue({ id: batch.messageId, kind: 'log', payload: this.#encode(batch, now) });
      if (!this.#deps.releaseFeed) log.markReleased(batch.messageId);
    }
    this.#settle();
  }

  #encode(batch: CutBatch, nowMs: number): Uint8Array {
    return encodeLogMessage(
      {
        messageId: batch.messageId,
        clusterId: this.#deps.identity.clusterId,
        agentId: this.#deps.identity.agentId,
        // The first line's time, as the Go agent puts the line's time (and the same on a
        // replay); the flush time only for lines without a timestamp.
        timestampMs: batch.firstTimeMs > 0 ? batch.firstTimeMs : nowMs,
      },
      batch.entries,
    );
  }

  /**
   * Moves the checkpoints over released batches: one SQLite commit for every release since the
   * last flush instead of a commit per gateway ack. Until then the intents still name those
   * batches, so a crash in between replays them under the same ids, which the gateway drops.
   */
  #settle(): void {
    const { registry, logger } = this.#deps;
    const moves = [];
    for (const { log, meta } of registry.values()) {
      const moved = log.settle();
      if (!moved) continue;
      registry.forget(moved.released);
      moves.push({ instance: log.instance, meta, ...moved });
    }
    try {
      const store = this.#deps.store();
      if (moves.length > 0) store.advance(moves);
      // A previous instance read to its end is finished once all of it is released.
      for (const tracked of registry.finishable()) {
        store.markFinished(tracked.log.instance, tracked.meta);
        registry.finished(tracked);
      }
    } catch (err: unknown) {
      // The batches are delivered; a lost checkpoint write only means a deduplicated replay.
      logger.error({ err }, 'checkpoint write failed');
    }
  }
}
