// The workload that owns a pod: ReplicaSet -> Deployment, Job -> CronJob, others as they are.
// Cached per owner for a few minutes; a failed lookup caches the direct owner. Concurrent asks for
// the same owner share one lookup: besides sparing the API server a GET per pod of a new
// ReplicaSet, that keeps answers in the order they were asked, which the pod lifecycle events rely
// on (a pod's CREATED and STARTED are both sent after their workload resolves: with a lookup
// each, the second could come back first and STARTED reach the gateway before CREATED).
import type { V1OwnerReference, V1Pod } from '@kubernetes/client-node';

export interface Workload {
  readonly name: string;
  readonly kind: string;
}

/** Reads the controller of a ReplicaSet or Job (undefined: none); gives up at `signal`. */
export type OwnerLookup = (
  kind: 'ReplicaSet' | 'Job',
  namespace: string,
  name: string,
  signal: AbortSignal,
) => Promise<V1OwnerReference | undefined>;

const TTL_MS = 5 * 60_000;
/**
 * A lookup gives up after this long and the direct owner is the answer: every ask for the same
 * owner waits on one lookup, so a request the API server never answers would otherwise hold the
 * log sessions and lifecycle events of every pod of that owner.
 */
export const LOOKUP_TIMEOUT_MS = 10_000;

export class WorkloadResolver {
  readonly #lookup: OwnerLookup;
  readonly #now: () => number;
  readonly #cache = new Map<string, { workload: Workload; atMs: number }>();
  /** Lookups under way, by owner: a second ask awaits the same one. */
  readonly #pending = new Map<string, Promise<Workload>>();

  readonly #timeoutMs: number;

  constructor(lookup: OwnerLookup, now: () => number, timeoutMs = LOOKUP_TIMEOUT_MS) {
    this.#lookup = lookup;
    this.#now = now;
    this.#timeoutMs = timeoutMs;
  }

  async resolve(pod: V1Pod): Promise<Workload> {
    const { ownerReferences = [], namespace = '' } = pod.metadata ?? {};
    const owner = ownerReferences.find((ref) => ref.controller);
    if (!owner) return { name: '', kind: '' };
    if (owner.kind !== 'ReplicaSet' && owner.kind !== 'Job') {
      return { name: owner.name, kind: owner.kind };
    }
    const key = `${namespace}/${owner.kind}/${owner.name}`;
    const cached = this.#cache.get(key);
    if (cached && this.#now() - cached.atMs < TTL_MS) return cached.workload;
    const pending = this.#pending.get(key);
    if (pending !== undefined) return pending;
    const lookup = this.#parentOf(owner.kind, namespace, owner.name).then((workload) => {
      this.#pending.delete(key);
      this.#cache.set(key, { workload, atMs: this.#now() });
      if (this.#cache.size > 10_000) this.#cache.delete(this.#cache.keys().next().value ?? '');
      return workload;
    });
    this.#pending.set(key, lookup);
    return lookup;
  }

  async #parentOf(kind: 'ReplicaSet' | 'Job', namespace: string, name: string): Promise<Workload> {
    try {
      const parent = await this.#lookup(
        kind,
        namespace,
        name,
        AbortSignal.timeout(this.#timeoutMs),
      );
      if (parent) return { name: parent.name, kind: parent.kind };
    } catch {
      // Deleted owner or no permission: the direct owner is the best answer, cached as such.
    }
    return { name, kind };
  }
}
