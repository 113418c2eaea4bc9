// Workload resolution: ReplicaSet -> Deployment, Job -> CronJob, other controllers as they are,
// cached for 5 minutes; a failed lookup yields (and caches) the direct owner.
import type { V1OwnerReference, V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { WorkloadResolver, type OwnerLookup } from './workload.js';

function ref(kind: string, name: string, controller = true): V1OwnerReference {
  return { apiVersion: 'v1', kind, name, uid: `${kind}-${name}`, controller };
}

function podOwnedBy(...owners: V1OwnerReference[]): V1Pod {
  return { metadata: { name: 'p', namespace: 'prod', ownerReferences: owners } };
}

/** Owners by `<kind>/<name>`; a missing entry has no controller, 'throw' fails the lookup. */
function lookup(table: Record<string, V1OwnerReference | 'throw'>) {
  const calls: string[] = [];
  const fn: OwnerLookup = (kind, namespace, name) => {
    calls.push(`${kind}/${namespace}/${name}`);
    const answer = table[`${kind}/${name}`];
    if (answer === 'throw') return Promise.reject(new Error('forbidden'));
    return Promise.resolve(answer);
  };
  return { fn, calls };
}

describe('WorkloadResolver', () => {
  it('resolves ReplicaSet -> Deployment and Job -> CronJob through the controller reference', async () => {
    const { fn, calls } = lookup({
      'ReplicaSet/web-7d9f': ref('Deployment', 'web'),
      'Job/nightly-2900': ref('CronJob', 'nightly'),
    });
    const resolver = new WorkloadResolver(fn, () => 0);
    expect(await resolver.resolve(podOwnedBy(ref('ReplicaSet', 'web-7d9f')))).toEqual({
      name: 'web',
      kind: 'Deployment',
    });
    expect(await resolver.resolve(podOwnedBy(ref('Job', 'nightly-2900')))).toEqual({
      name: 'nightly',
      kind: 'CronJob',
    });
    expect(calls).toEqual(['ReplicaSet/prod/web-7d9f', 'Job/prod/nightly-2900']);
  });

  it('keeps a bare ReplicaSet or Job, other controllers as they are, and a pod without one blank', async () => {
    const { fn, calls } = lookup({});
    const resolver = new WorkloadResolver(fn, () => 0);
    expect(await resolver.resolve(podOwnedBy(ref('ReplicaSet', 'rs')))).toEqual({
      name: 'rs',
      kind: 'ReplicaSet',
    });
    expect(await resolver.resolve(podOwnedBy(ref('Job', 'once')))).toEqual({
      name: 'once',
      kind: 'Job',
    });
    expect(await resolver.resolve(podOwnedBy(ref('StatefulSet', 'db')))).toEqual({
      name: 'db',
      kind: 'StatefulSet',
    });
    expect(await resolver.resolve(podOwnedBy(ref('DaemonSet', 'agent')))).toEqual({
      name: 'agent',
      kind: 'DaemonSet',
    });
    // Only the controller reference counts.
    expect(await resolver.resolve(podOwnedBy(ref('ReplicaSet', 'x', false)))).toEqual({
      name: '',
      kind: '',
    });
    expect(await resolver.resolve({ metadata: { name: 'bare' } })).toEqual({ name: '', kind: '' });
    expect(calls).toEqual(['ReplicaSet/prod/rs', 'Job/prod/once']);
  });

  it('caches for 5 minutes, including the direct owner after a failed lookup', async () => {
    let now = 0;
    const { fn, calls } = lookup({ 'ReplicaSet/web-1': 'throw' });
    const resolver = new WorkloadResolver(fn, () => now);
    const pod = podOwnedBy(ref('ReplicaSet', 'web-1'));
    expect(await resolver.resolve(pod)).toEqual({ name: 'web-1', kind: 'ReplicaSet' });
    now += 5 * 60_000 - 1;
    expect(await resolver.resolve(pod)).toEqual({ name: 'web-1', kind: 'ReplicaSet' });
    expect(calls).toHaveLength(1);
    now += 1;
    await resolver.resolve(pod);
    expect(calls).toHaveLength(2);
  });

  it('answers concurrent asks for one owner with one lookup, in the order they were asked', async () => {
    // Each lookup waits until the test answers it, the later one first: what a second GET that
    // comes back sooner than the first would do.
    const answers: ((owner: V1OwnerReference) => void)[] = [];
    const slow: OwnerLookup = () =>
      new Promise<V1OwnerReference | undefined>((resolve) => answers.push(resolve));
    const resolver = new WorkloadResolver(slow, () => 0);
    const pod = podOwnedBy(ref('ReplicaSet', 'web-7d9f'));
    const arrived: string[] = [];
    const created = resolver.resolve(pod).then(() => arrived.push('CREATED'));
    const started = resolver.resolve(pod).then(() => arrived.push('STARTED'));
    for (const answer of [...answers].reverse()) answer(ref('Deployment', 'web'));
    await Promise.all([created, started]);
    expect(arrived).toEqual(['CREATED', 'STARTED']);
    expect(answers).toHaveLength(1);
  });

  it('gives up on a lookup the API server never answers: the direct owner, and later asks are not held', async () => {
    let calls = 0;
    const hanging: OwnerLookup = (_kind, _namespace, _name, signal) => {
      calls += 1;
      return new Promise((_resolve, reject) => {
        signal.addEventListener('abort', () => {
          reject(new Error('aborted'));
        });
      });
    };
    const resolver = new WorkloadResolver(hanging, () => 0, 50);
    const pod = podOwnedBy(ref('ReplicaSet', 'web-7d9f'));
    const first = resolver.resolve(pod);
    const second = resolver.resolve(pod);
    expect(await first).toEqual({ name: 'web-7d9f', kind: 'ReplicaSet' });
    expect(await second).toEqual({ name: 'web-7d9f', kind: 'ReplicaSet' });
    expect(calls).toBe(1);
  });
});
