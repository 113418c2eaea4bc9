// From pods to container sessions: the reflector's lists and changes decide which containers
// are followed (one ContainerSession per container ever eligible), and the periodic sweep drops
// what a deleted pod left behind: its checkpoints after the grace period, its logs and its
// sessions. The source (pod-log-source.ts) owns the timers and the lifecycle; this unit owns the
// per-container state, so one place shows when a container stream starts and ends.
import type { V1Pod } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { Clock } from '../../../shared/clock.js';
import type { CheckpointStore } from './checkpoint-store.js';
import { ContainerSession, type SessionContext } from './container-session.js';
import type { compileEligibility } from './eligibility.js';
import type { LogRegistry } from './log-registry.js';
import { containerKeyOf } from './pod-fields.js';

/** What the scheduler is told: a container to follow, or one to let go. */
export interface StreamWants {
  want(key: string): void;
  unwant(key: string): void;
}

export interface PodReconcilerDeps {
  readonly logger: Logger;
  readonly clock: Clock;
  readonly eligible: ReturnType<typeof compileEligibility>;
  readonly context: SessionContext;
  readonly registry: LogRegistry;
  readonly store: () => CheckpointStore;
  /** The scheduler, once started; before it, wants are only recorded in the sessions. */
  readonly streams: () => StreamWants | undefined;
  /** Every namespace the reflectors watch ('' for all): the absent-pod sweep waits for all. */
  readonly namespaces: readonly string[];
  readonly checkpointGraceMs: number;
}

export class PodReconciler {
  readonly #deps: PodReconcilerDeps;
  readonly #sessions = new Map<string, ContainerSession>();
  /** The pod uids of each namespace's last list, kept up to date by its watch. */
  readonly #podsByNamespace = new Map<string, Set<string>>();
  /** Checkpoints of pods absent from the first lists were swept (once per start). */
  #absentSwept = false;

  constructor(deps: PodReconcilerDeps) {
    this.#deps = deps;
  }

  /** The session the scheduler runs for a container key. */
  session(key: string): ContainerSession | undefined {
    return this.#sessions.get(key);
  }

  /** A namespace's full list (first list or relist): pods missing from it are gone. */
  replace(namespace: string, pods: readonly V1Pod[]): void {
    const seen = new Set(pods.map((p) => p.metadata?.uid ?? ''));
    for (const uid of this.#podsByNamespace.get(namespace) ?? []) {
      if (!seen.has(uid)) {
        const gone = this.#wantedPod(uid);
        if (gone) this.remove(gone);
      }
    }
    this.#podsByNamespace.set(namespace, seen);
    for (const pod of pods) this.#reconcile(pod);
    this.#sweepAbsentPods();
  }

  /** A pod added or changed in a namespace's watch. */
  upsert(namespace: string, pod: V1Pod): void {
    this.#podsByNamespace.get(namespace)?.add(pod.metadata?.uid ?? '');
    this.#reconcile(pod);
  }

  /** A pod deleted: its sessions stop, and its checkpoints are kept for the grace period. */
  remove(pod: V1Pod): void {
    const uid = pod.metadata?.uid ?? '';
    for (const session of this.#sessions.values()) {
      if (!session.wanted || !session.key.startsWith(`${uid}/`)) continue;
      session.unwant();
      this.#deps.streams()?.unwant(session.key);
    }
    this.#deps.store().markPodDeleted(uid, this.#deps.clock.now());
  }

  /** Drops the checkpoints, logs and sessions that deleted pods left behind. */
  sweep(): void {
    const now = this.#deps.clock.now();
    this.#deps.store().sweep(now - this.#deps.checkpointGraceMs);
    const live = new Set<string>();
    for (const session of this.#sessions.values()) {
      if (session.wanted) live.add(session.wanted.pod.metadata?.uid ?? '');
    }
    this.#deps.registry.sweep(live);
    for (const [key, session] of this.#sessions) {
      if (!session.wanted && !session.connected && !live.has(key.split('/')[0] ?? '')) {
        this.#sessions.delete(key);
      }
    }
  }

  #reconcile(pod: V1Pod): void {
    const uid = pod.metadata?.uid ?? '';
    const keep = new Set<string>();
    for (const target of this.#deps.eligible(pod)) {
      const key = containerKeyOf(pod, target.container);
      keep.add(key);
      let session = this.#sessions.get(key);
      if (!session) {
        session = new ContainerSession(key, this.#deps.context);
        this.#sessions.set(key, session);
      }
      session.want(pod, target);
      this.#deps.streams()?.want(key);
    }
    for (const session of this.#sessions.values()) {
      if (session.wanted && session.key.startsWith(`${uid}/`) && !keep.has(session.key)) {
        session.unwant();
        this.#deps.streams()?.unwant(session.key);
      }
    }
  }

  /** The pod a session still reads, by uid. */
  #wantedPod(uid: string): V1Pod | undefined {
    for (const session of this.#sessions.values()) {
      if (session.wanted?.pod.metadata?.uid === uid) return session.wanted.pod;
    }
    return undefined;
  }

  /**
   * Once every watched namespace has been listed: checkpoints of pods in none of the lists
   * belong to pods deleted while the collector was down (the watch never reports those). They
   * are removed at once: their logs can no longer be read.
   */
  #sweepAbsentPods(): void {
    const lists = this.#podsByNamespace;
    if (this.#absentSwept || !this.#deps.namespaces.every((ns) => lists.has(ns))) return;
    this.#absentSwept = true;
    const live = new Set([...lists.values()].flatMap((uids) => [...uids]));
    const store = this.#deps.store();
    try {
      const absent = store.podUids().filter((uid) => !live.has(uid));
      if (absent.length === 0) return;
      const rows = store.removePods(absent);
      this.#deps.logger.info(
        { pods: absent.length, rows },
        'checkpoints of pods deleted while down removed',
      );
    } catch (err: unknown) {
      this.#deps.logger.error({ err }, 'checkpoint sweep failed');
    }
  }
}

/** The namespaces the rules name, or [''] (all) when a rule names none. */
export function namespacesToWatch(rules: readonly { readonly namespace: string }[]): string[] {
  const namespaces = rules.map((rule) => rule.namespace.trim());
  return namespaces.length === 0 || namespaces.includes('') ? [''] : [...new Set(namespaces)];
}
