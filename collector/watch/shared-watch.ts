// One list/watch per resource + namespace + selectors, shared by every user in the collector (the
// pod log source, the state rules, the lifecycle deriver, the Events watch): the API server sees
// one list and one watch however many users a target has, and each user still keeps its own
// cache of its own transform (a pod's sanitized JSON, its lifecycle summary, the V1Pod the log
// reconciler reads), never a shared copy of the raw object.
//
// - Shared only on an exactly equal target (group, version, resource, namespace, label and field
//   selectors, metadata-only): a narrower user is never fed from a broader watch and filtered
//   here, because a field selector's server-side meaning (e.g. spec.nodeName, status.phase) is
//   not reproducible client-side in general, and a filtered feed would also lose the DELETED a
//   relabelled object owes the narrower user.
// - Each object off the wire is parsed once and handed to every user's transform in the order
//   they subscribed, on the same parsed object: a transform may remove what no other user reads
//   (the state source's sanitizing drops managedFields and the last-applied annotation), never
//   more. Raw objects are not kept after the transforms ran.
// - A user that joins while the watch runs gets a fresh list: the watch is restarted (one list
//   more at the server); the other users see that relist as any relist (their caches re-send
//   nothing unchanged). A user that leaves just stops being fed; the last one stops the watch.
//   To spare that second list at start, a source whose watches are known only after a
//   discovery request holds the hub (hold()) until they are subscribed: no watch starts while
//   the hub is held, so the users known at start all share the first list.
import type { Logger } from 'pino';
import type { Clock } from '../../shared/clock.js';
import type { ListWatch } from './list-watch.js';
import { runReflector, type ReflectorHandlers, type WatchFeed } from './reflector.js';
import type { KubeObject, WatchTarget } from './kube-list-watch.js';

export interface WatchHubDeps {
  readonly clock: Clock;
  readonly logger: Logger;
  /** The raw list/watch of one target (kubeListWatch over the collector's KubeHttp). */
  listWatch(target: WatchTarget): ListWatch<KubeObject>;
  readonly random?: () => number;
  /** Objects per list page (reflector.ts LIST_PAGE_SIZE by default). */
  readonly pageSize?: number;
}

/** One user of a shared watch. */
interface User {
  readonly transform: (object: KubeObject) => unknown;
  readonly handlers: ReflectorHandlers<unknown>;
}

/** One object after every user's transform: its version and one value per user of the round. */
interface Fanned {
  readonly resourceVersion: string | undefined;
  readonly values: readonly unknown[];
}

/** The identity of a target: two users share a watch only when these are equal. */
export function targetKey(target: WatchTarget): string {
  return JSON.stringify([
    target.group,
    target.version,
    target.resource,
    target.namespaced ? target.namespace : '',
    target.labelSelector ?? '',
    target.fieldSelector ?? '',
    target.metadataOnly === true,
  ]);
}

/** One target's watch: runs while it has users, restarted (relisted) when one joins. */
class SharedWatch {
  readonly #users = new Set<User>();
  readonly #deps: WatchHubDeps;
  readonly #target: WatchTarget;
  readonly #onIdle: () => void;
  #round: AbortController | undefined;
  #loop: Promise<void> | undefined;

  constructor(target: WatchTarget, deps: WatchHubDeps, onIdle: () => void) {
    this.#target = target;
    this.#deps = deps;
    this.#onIdle = onIdle;
  }

  get users(): number {
    return this.#users.size;
  }

  /** `start`: false while the hub is held (the user waits for the release). */
  add(user: User, start: boolean): void {
    this.#users.add(user);
    // The running round's list did not pass through this user's transform: start another.
    this.#round?.abort();
    if (start) this.start();
  }

  start(): void {
    if (this.#users.size > 0 && this.#loop === undefined) this.#loop = this.#run();
  }

  remove(user: User): void {
    this.#users.delete(user);
    if (this.#users.size === 0) this.#round?.abort();
  }

  async #run(): Promise<void> {
    const raw = this.#deps.listWatch(this.#target);
    try {
      while (this.#users.size > 0) {
        const round = new AbortController();
        this.#round = round;
        await this.#runRound(raw, [...this.#users], round.signal);
      }
    } finally {
      this.#round = undefined;
      this.#loop = undefined;
      this.#onIdle();
    }
  }

  /** One reflector over a fixed set of users, until a user joins or the last one leaves. */
  async #runRound(
    raw: ListWatch<KubeObject>,
    users: readonly User[],
    signal: AbortSignal,
  ): Promise<void> {
    const fan = (object: KubeObject): Fanned => ({
      resourceVersion: object.metadata?.resourceVersion,
      values: users.map((user) => user.transform(object)),
    });
    const api: ListWatch<Fanned> = {
      async list(listSignal, options) {
        const page = await raw.list(listSignal, options);
        return { ...page, items: page.items.map(fan) };
      },
      watch(resourceVersion, onEvent, watchSignal) {
        return raw.watch(
          resourceVersion,
          (type, object) => {
            onEvent(type, fan(object));
          },
          watchSignal,
        );
      },
    };
    // A user that left during the round is not fed again.
    const each = (call: (handlers: ReflectorHandlers<unknown>, index: number) => void): void => {
      users.forEach((user, index) => {
        if (this.#users.has(user)) call(user.handlers, index);
      });
    };
    await runReflector(
      api,
      {
        replace: (objects) => {
          each((h, i) => {
            h.replace(objects.map((object) => object.values[i]));
          });
        },
        upsert: (object) => {
          each((h, i) => {
            h.upsert(object.values[i]);
          });
        },
        remove: (object) => {
          each((h, i) => {
            h.remove(object.values[i]);
          });
        },
        forbidden: (err, verb) => {
          each((h) => {
            h.forbidden(err, verb);
          });
        },
        restarted: (cause) => {
          each((h) => h.restarted?.(cause));
        },
        failed: (err, verb) => {
          each((h) => h.failed?.(err, verb));
        },
      },
      {
        clock: this.#deps.clock,
        logger: this.#deps.logger,
        signal,
        resourceVersionOf: (object) => object.resourceVersion,
        ...(this.#deps.random === undefined ? {} : { random: this.#deps.random }),
        ...(this.#deps.pageSize === undefined ? {} : { pageSize: this.#deps.pageSize }),
      },
    );
  }
}

/** The collector's shared watches, one per target (targetKey). */
export class WatchHub {
  readonly #deps: WatchHubDeps;
  readonly #watches = new Map<string, SharedWatch>();
  #holds = 0;

  constructor(deps: WatchHubDeps) {
    this.#deps = deps;
  }

  /**
   * A feed of `target` through `transform`: running it subscribes to the target's shared watch
   * until its signal aborts (an Informer, or the log source's reconciler, runs it).
   */
  feed<T>(target: WatchTarget, transform: (object: KubeObject) => T): WatchFeed<T> {
    return {
      run: async (handlers, signal) => {
        if (signal.aborted) return;
        const key = targetKey(target);
        let watch = this.#watches.get(key);
        if (watch === undefined) {
          const created: SharedWatch = new SharedWatch(target, this.#deps, () => {
            if (this.#watches.get(key) === created && created.users === 0) {
              this.#watches.delete(key);
            }
          });
          watch = created;
          this.#watches.set(key, created);
        }
        const user: User = {
          transform,
          handlers,
        };
        const shared = watch;
        await new Promise<void>((resolve) => {
          signal.addEventListener(
            'abort',
            () => {
              shared.remove(user);
              resolve();
            },
            { once: true },
          );
          shared.add(user, this.#holds === 0);
        });
      },
    };
  }

  /**
   * Holds every watch's start until the returned release is called (once per hold): users that
   * subscribe meanwhile share the first list instead of restarting it.
   */
  hold(): () => void {
    this.#holds++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#holds--;
      if (this.#holds === 0) for (const watch of this.#watches.values()) watch.start();
    };
  }
}
