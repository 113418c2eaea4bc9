// A reflector plus an object cache: turns lists and watch events into ADDED / MODIFIED /
// DELETED changes exactly once per change. The cache holds what the transform made of each
// object (never the raw object), keyed by namespace/name with the UID and resourceVersion, so:
// - a relist re-sends nothing that did not change (same resourceVersion), synthesizes DELETED
//   for what disappeared while the watch was away, and reports a same-name object with a new
//   UID as DELETED + ADDED (client-node's cache calls that an update; reference D.4);
// - a periodic resync (0 disables) re-emits every cached object as MODIFIED, as client-go does.
import type { Logger } from 'pino';
import type { Clock } from '../../shared/clock.js';
import type { ListWatch } from './list-watch.js';
import { errorCode, reflectorFeed, type RestartCause, type WatchFeed } from './reflector.js';

/** What the cache needs of every stored object. */
export interface Cached {
  /** namespace/name (name alone when cluster-scoped). */
  readonly key: string;
  readonly uid: string;
  readonly resourceVersion: string;
}

export type ChangeType = 'ADDED' | 'MODIFIED' | 'DELETED';

export interface Change<T> {
  readonly type: ChangeType;
  readonly object: T;
  /** The cached object before a MODIFIED. */
  readonly previous?: T | undefined;
  /** A periodic resync, not a change on the server. */
  readonly resync?: boolean;
}

export interface InformerOptions<T> {
  readonly name: string;
  readonly clock: Clock;
  readonly logger: Logger;
  /** 0: no resync. */
  readonly resyncMs?: number;
  onChange(change: Change<T>): void;
  onForbidden?(err: unknown, verb: 'list' | 'watch'): void;
  onRestart?(cause: RestartCause): void;
  /** A list or watch failed (other than a denial) and is retried with backoff. */
  onFailure?(failure: { code: number | undefined; verb: 'list' | 'watch' }): void;
  /** After every successful (re)list. */
  onSynced?(): void;
  readonly random?: () => number;
}

export class Informer<T extends Cached> {
  readonly #api: ListWatch<T> | WatchFeed<T>;
  readonly #options: InformerOptions<T>;
  readonly #cache = new Map<string, T>();
  #synced = false;
  #forbidden: { verb: 'list' | 'watch'; message: string } | undefined;
  #failure: { code: number | undefined; verb: 'list' | 'watch'; message: string } | undefined;

  /** `api`: a list/watch of its own, or a share of a watch (WatchHub.feed). */
  constructor(api: ListWatch<T> | WatchFeed<T>, options: InformerOptions<T>) {
    this.#api = api;
    this.#options = options;
  }

  get name(): string {
    return this.#options.name;
  }

  /** True once the first list has been applied. */
  synced(): boolean {
    return this.#synced;
  }

  /** The refused verb while the API server denies us, else undefined. */
  forbidden(): { verb: 'list' | 'watch'; message: string } | undefined {
    return this.#forbidden;
  }

  /** The last failure since the last successful list (retried with backoff meanwhile). */
  failure(): { code: number | undefined; verb: 'list' | 'watch'; message: string } | undefined {
    return this.#failure;
  }

  get size(): number {
    return this.#cache.size;
  }

  get(key: string): T | undefined {
    return this.#cache.get(key);
  }

  values(): IterableIterator<T> {
    return this.#cache.values();
  }

  /** Runs until `signal` aborts; never emits after that (a stop emits no DELETED). */
  async run(signal: AbortSignal): Promise<void> {
    const resync = this.#startResync(signal);
    try {
      const feed =
        'run' in this.#api
          ? this.#api
          : reflectorFeed(this.#api, {
              clock: this.#options.clock,
              logger: this.#options.logger,
              resourceVersionOf: (object) => object.resourceVersion,
              ...(this.#options.random === undefined ? {} : { random: this.#options.random }),
            });
      await feed.run(
        {
          replace: (objects) => {
            if (!signal.aborted) this.#replace(objects);
          },
          upsert: (object) => {
            if (!signal.aborted) this.#upsert(object);
          },
          remove: (object) => {
            if (!signal.aborted) this.#remove(object);
          },
          forbidden: (err, verb) => {
            this.#forbidden = { verb, message: err instanceof Error ? err.message : String(err) };
            this.#options.onForbidden?.(err, verb);
          },
          restarted: (cause) => this.#options.onRestart?.(cause),
          failed: (err, verb) => {
            this.#failure = {
              code: errorCode(err),
              verb,
              message: err instanceof Error ? err.message : String(err),
            };
            this.#options.onFailure?.(this.#failure);
          },
        },
        signal,
      );
    } finally {
      clearInterval(resync);
    }
  }

  #emit(change: Change<T>): void {
    try {
      this.#options.onChange(change);
    } catch (err: unknown) {
      // A consumer's bug must not stop the watch (the object is still cached).
      this.#options.logger.error({ err, informer: this.name }, 'change handler failed');
    }
  }

  #replace(objects: readonly T[]): void {
    const seen = new Set<string>();
    for (const object of objects) {
      seen.add(object.key);
      this.#upsert(object);
    }
    for (const [key, cached] of this.#cache) {
      if (!seen.has(key)) {
        this.#cache.delete(key);
        this.#emit({ type: 'DELETED', object: cached });
      }
    }
    this.#synced = true;
    this.#forbidden = undefined;
    this.#failure = undefined;
    this.#options.onSynced?.();
  }

  #upsert(object: T): void {
    const cached = this.#cache.get(object.key);
    if (cached === undefined) {
      this.#cache.set(object.key, object);
      this.#emit({ type: 'ADDED', object });
      return;
    }
    if (cached.uid !== object.uid) {
      // Deleted and recreated under the same name while we were away (or between events).
      this.#cache.set(object.key, object);
      this.#emit({ type: 'DELETED', object: cached });
      this.#emit({ type: 'ADDED', object });
      return;
    }
    if (cached.resourceVersion === object.resourceVersion) return;
    this.#cache.set(object.key, object);
    this.#emit({ type: 'MODIFIED', object, previous: cached });
  }

  #remove(object: T): void {
    const cached = this.#cache.get(object.key);
    // A DELETED for an object we never saw (or an older incarnation) still says it is gone.
    if (cached?.uid === object.uid) this.#cache.delete(object.key);
    this.#emit({ type: 'DELETED', object });
  }

  #startResync(signal: AbortSignal): ReturnType<typeof setInterval> | undefined {
    const every = this.#options.resyncMs ?? 0;
    if (every <= 0) return undefined;
    const timer = setInterval(() => {
      if (signal.aborted || !this.#synced) return;
      for (const object of this.#cache.values()) {
        this.#emit({ type: 'MODIFIED', object, previous: object, resync: true });
      }
    }, every);
    timer.unref();
    return timer;
  }
}

/** namespace/name, or name for a cluster-scoped object. */
export function objectKey(namespace: string | undefined, name: string | undefined): string {
  return namespace === undefined || namespace === '' ? (name ?? '') : `${namespace}/${name ?? ''}`;
}
