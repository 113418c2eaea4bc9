// Every ContainerLog of the pod log source, one per container instance (pod uid, container,
// restart count), with what the source knows about each beyond the log itself: whether its tail
// still applies, whether it was read to its end, where its last delivering connection began, and
// its misread checks (restart.ts). Batches are found again by message id when the buffer
// releases them.
import type { V1Pod } from '@kubernetes/client-node';
import type { Clock } from '../../../shared/clock.js';
import type {
  CheckpointStore,
  ContainerInstance,
  InstanceMeta,
  SavedCheckpoint,
} from './checkpoint-store.js';
import { ContainerLog, type DropReason, type IngestLimits } from './container-log.js';
import type { LinePosition } from './joiner.js';
import { podIdentity } from './pod-fields.js';
import type { Workload } from './workload.js';

/** One container instance's log and the source's state about it. */
export interface TrackedLog {
  readonly log: ContainerLog;
  readonly meta: InstanceMeta;
  /** The tail applies until a connection of the instance has read something. */
  tailPending: boolean;
  /** A previous instance read to its end in this process: never read again. */
  readToEnd: boolean;
  /** Where the last connection that delivered lines into it started (its read position). */
  deliveringFrom: { readonly from: LinePosition | undefined } | undefined;
  /** A previous instance already checked for a misread of the next one (issue #5). */
  misreadChecked: boolean;
  /** A new instance that skips a misread: its first connection reports what it skipped. */
  misreadSkip: boolean;
}

export interface LogRegistryDeps {
  readonly clock: Clock;
  /** The checkpoint store (memory-only until the source starts). */
  store(): CheckpointStore;
  /** The ingest limits now. */
  limits(): IngestLimits;
  readonly maxBatchEntries: number;
  readonly maxBatchBytes: number;
  /** The pod's workload, once resolved. */
  workloadOf(podUid: string): Workload | undefined;
  dropped(reason: DropReason): void;
  truncated(): void;
}

const instanceKey = (instance: ContainerInstance): string =>
  `${instance.podUid}/${instance.container}/${String(instance.restartCount)}`;

export class LogRegistry {
  readonly #deps: LogRegistryDeps;
  readonly #logs = new Map<string, TrackedLog>();
  readonly #byMessageId = new Map<string, ContainerLog>();
  /** The first restart count seen of each container (`<pod uid>/<container>`). */
  readonly #firstRestart = new Map<string, number>();
  /** Read to their end, to be marked finished in the store once every batch is released. */
  readonly #finishPending = new Set<TrackedLog>();

  constructor(deps: LogRegistryDeps) {
    this.#deps = deps;
  }

  find(instance: ContainerInstance): TrackedLog | undefined {
    return this.#logs.get(instanceKey(instance));
  }

  /**
   * The log of an instance, created (from `loaded` or the store's checkpoint) on first use, and
   * whether the tail applies: only on first sight of the container without a checkpoint; a new
   * instance after a restart is read from its beginning.
   */
  open(
    pod: V1Pod,
    container: string,
    restartCount: number,
    loaded?: SavedCheckpoint,
  ): { tracked: TrackedLog; tail: boolean } {
    const id = podIdentity(pod);
    const instance: ContainerInstance = { podUid: id.uid, container, restartCount };
    const key = instanceKey(instance);
    const existing = this.#logs.get(key);
    if (existing) return { tracked: existing, tail: existing.tailPending };
    const saved = loaded ?? this.#deps.store().load(instance);
    const workload = this.#deps.workloadOf(id.uid) ?? { name: '', kind: '' };
    const log = new ContainerLog({
      instance,
      base: {
        podName: id.name,
        namespace: id.namespace,
        container,
        labels: id.labels,
        workload: workload.name,
        workloadKind: workload.kind,
        nodeName: id.nodeName,
      },
      saved,
      limits: this.#deps.limits(),
      maxBatchEntries: this.#deps.maxBatchEntries,
      maxBatchBytes: this.#deps.maxBatchBytes,
      nowMs: this.#deps.clock.now(),
      onDrop: (reason) => {
        this.#deps.dropped(reason);
      },
      onTruncated: () => {
        this.#deps.truncated();
      },
    });
    const containerKey = `${instance.podUid}/${container}`;
    const first = this.#firstRestart.get(containerKey);
    if (first === undefined) this.#firstRestart.set(containerKey, instance.restartCount);
    const tail = saved.position === undefined && saved.intents.length === 0 && first === undefined;
    const tracked: TrackedLog = {
      log,
      meta: { namespace: id.namespace, podName: id.name },
      tailPending: tail,
      readToEnd: false,
      deliveringFrom: undefined,
      misreadChecked: false,
      misreadSkip: false,
    };
    this.#logs.set(key, tracked);
    for (const intent of saved.intents) this.#byMessageId.set(intent.messageId, log);
    return { tracked, tail };
  }

  /** How many logs are tracked. */
  get size(): number {
    return this.#logs.size;
  }

  values(): IterableIterator<TrackedLog> {
    return this.#logs.values();
  }

  /** A batch of `log` went to the sink under `messageId`: its release finds it here. */
  enqueued(messageId: string, log: ContainerLog): void {
    this.#byMessageId.set(messageId, log);
  }

  /**
   * The buffer released these batches (any source's ids; others are ignored). True if one of
   * them was ours: a settle has work now.
   */
  release(ids: readonly string[]): boolean {
    const ours = ids.some((id) => this.#byMessageId.has(id));
    for (const id of ids) this.#byMessageId.get(id)?.markReleased(id);
    return ours;
  }

  /** Released batches whose checkpoint moved: no release will name them again. */
  forget(ids: readonly string[]): void {
    for (const id of ids) this.#byMessageId.delete(id);
  }

  /** A previous instance was read to its end: finished in the store once all of it is released. */
  readThrough(tracked: TrackedLog): void {
    tracked.readToEnd = true;
    this.#finishPending.add(tracked);
  }

  /** Instances read to their end with nothing outstanding: to be marked finished. */
  finishable(): TrackedLog[] {
    return [...this.#finishPending].filter(({ log }) => log.outstanding() === 0);
  }

  /** The store marked it finished: no longer pending. */
  finished(tracked: TrackedLog): void {
    this.#finishPending.delete(tracked);
  }

  /**
   * Whether an idle flush has anything to do: a log with pending work (ContainerLog.hasPending),
   * or an instance read to its end with nothing outstanding, to be marked finished.
   */
  hasPending(): boolean {
    for (const { log } of this.#logs.values()) if (log.hasPending()) return true;
    for (const { log } of this.#finishPending) if (log.outstanding() === 0) return true;
    return false;
  }

  /** Batches enqueued and not yet released, over all instances: the checkpoint lag. */
  unreleased(): number {
    let count = 0;
    for (const { log } of this.#logs.values()) count += log.outstanding();
    return count;
  }

  setLimits(next: IngestLimits, nowMs: number): void {
    for (const { log } of this.#logs.values()) log.setLimits(next, nowMs);
  }

  /** Forgets the logs of pods not in `live` that have nothing outstanding. */
  sweep(live: ReadonlySet<string>): void {
    for (const [key, { log }] of this.#logs) {
      if (!live.has(log.instance.podUid) && log.outstanding() === 0) this.#logs.delete(key);
    }
  }
}
