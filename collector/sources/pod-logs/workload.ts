// The workload that owns a pod: ReplicaSet -> Deployment, Job -> CronJob, others as they are.
// Cached per owner for a few minutes; a failed lookup caches the direct owner.
import type { V1OwnerReference, V1Pod } from '@kubernetes/client-node';

export interface Workload {
  readonly name: string;
  readonly kind: string;
}

/** Reads the controller of a ReplicaSet or Job (undefined: none). */
export type OwnerLookup = (
  kind: 'ReplicaSet' | 'Job',
  namespace: string,
  name: string,
) => Promise<V1OwnerReference | undefined>;

const TTL_MS = 5 * 60_000;

export class WorkloadResolver {
  readonly #lookup: OwnerLookup;
  readonly #now: () => number;
  readonly #cache = new Map<string, { workload: Workload; atMs: number }>();

  constructor(lookup: OwnerLookup, now: () => number) {
    this.#lookup = lookup;
    this.#now = now;
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
    const workload = await this.#parentOf(owner.kind, namespace, owner.name);
    this.#cache.set(key, { workload, atMs: this.#now() });
    if (this.#cache.size > 10_000) this.#cache.delete(this.#cache.keys().next().value ?? '');
    return workload;
  }

  async #parentOf(kind: 'ReplicaSet' | 'Job', namespace: string, name: string): Promise<Workload> {
    try {
      const parent = await this.#lookup(kind, namespace, name);
      if (parent) return { name: parent.name, kind: parent.kind };
    } catch {
      // Deleted owner or no permission: the direct owner is the best answer, cached as such.
    }
    return { name, kind };
  }
}
