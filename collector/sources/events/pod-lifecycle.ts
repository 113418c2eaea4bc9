// Pod lifecycle events derived from pod status transitions: created, started, OOMKilled,
// CrashLoopBackOff (restart count, last exit code and reason), Evicted (its message),
// ImagePullBackOff / ErrImagePull, Completed, Deleted. Each once per transition: a transition's
// key (reason, container, restart count) is remembered per pod, so a relist, a resync or a
// kubelet alternating ErrImagePull and ImagePullBackOff never repeats it.
import type { Cached } from '../../watch/informer.js';
import { objectKey } from '../../watch/informer.js';
import type { KubeObject } from '../../watch/kube-list-watch.js';

export type LifecycleReason =
  | 'CREATED'
  | 'STARTED'
  | 'OOM_KILLED'
  | 'CRASH_LOOP_BACK_OFF'
  | 'EVICTED'
  | 'IMAGE_PULL_BACK_OFF'
  | 'ERR_IMAGE_PULL'
  | 'COMPLETED'
  | 'DELETED';

export type Severity = 'INFO' | 'WARNING' | 'ERROR';

export const SEVERITY: Readonly<Record<LifecycleReason, Severity>> = {
  CREATED: 'INFO',
  STARTED: 'INFO',
  COMPLETED: 'INFO',
  DELETED: 'INFO',
  IMAGE_PULL_BACK_OFF: 'WARNING',
  ERR_IMAGE_PULL: 'WARNING',
  EVICTED: 'WARNING',
  CRASH_LOOP_BACK_OFF: 'ERROR',
  OOM_KILLED: 'ERROR',
};

interface ContainerSummary {
  readonly name: string;
  readonly state: 'waiting' | 'running' | 'terminated' | 'unknown';
  readonly reason: string;
  readonly message: string;
  readonly exitCode: number;
  readonly restartCount: number;
  readonly startedAt: string;
  readonly last: { readonly reason: string; readonly exitCode: number } | undefined;
}

/** What the lifecycle cache keeps of a pod: only the status it compares. */
export interface PodSummary extends Cached {
  readonly name: string;
  readonly namespace: string;
  readonly node: string;
  readonly phase: string;
  readonly reason: string;
  readonly message: string;
  readonly owner: { readonly kind: string; readonly name: string } | undefined;
  readonly containers: readonly ContainerSummary[];
}

export interface LifecycleTransition {
  readonly reason: LifecycleReason;
  readonly container: string;
  readonly restartCount: number;
  readonly exitCode: number;
  readonly terminationReason: string;
  readonly message: string;
}

interface RawContainerStatus {
  name?: string;
  restartCount?: number;
  state?: RawState;
  lastState?: RawState;
}
interface RawState {
  waiting?: { reason?: string; message?: string };
  running?: { startedAt?: string };
  terminated?: { reason?: string; message?: string; exitCode?: number };
}

const text = (value: unknown): string => (typeof value === 'string' ? value : '');
const number = (value: unknown): number => (typeof value === 'number' ? value : 0);

function currentState(
  state: RawState,
): Pick<ContainerSummary, 'state' | 'reason' | 'message' | 'exitCode' | 'startedAt'> {
  const { waiting, terminated, running } = state;
  if (waiting !== undefined) {
    return {
      state: 'waiting',
      reason: text(waiting.reason),
      message: text(waiting.message),
      exitCode: 0,
      startedAt: '',
    };
  }
  if (terminated !== undefined) {
    return {
      state: 'terminated',
      reason: text(terminated.reason),
      message: text(terminated.message),
      exitCode: number(terminated.exitCode),
      startedAt: '',
    };
  }
  if (running !== undefined) {
    return {
      state: 'running',
      reason: '',
      message: '',
      exitCode: 0,
      startedAt: text(running.startedAt),
    };
  }
  return { state: 'unknown', reason: '', message: '', exitCode: 0, startedAt: '' };
}

function summarizeContainer(status: RawContainerStatus): ContainerSummary {
  const lastTerminated = status.lastState?.terminated;
  return {
    name: text(status.name),
    restartCount: number(status.restartCount),
    last:
      lastTerminated === undefined
        ? undefined
        : { reason: text(lastTerminated.reason), exitCode: number(lastTerminated.exitCode) },
    ...currentState(status.state ?? {}),
  };
}

interface RawPod {
  spec?: { nodeName?: string };
  status?: {
    phase?: string;
    reason?: string;
    message?: string;
    initContainerStatuses?: RawContainerStatus[];
    containerStatuses?: RawContainerStatus[];
  };
}

function controllerOf(owners: unknown): PodSummary['owner'] {
  const list = (Array.isArray(owners) ? owners : []) as {
    kind?: string;
    name?: string;
    controller?: boolean;
  }[];
  const owner = list.find((ref) => ref.controller === true);
  return owner === undefined ? undefined : { kind: text(owner.kind), name: text(owner.name) };
}

/** The informer's transform for pods: nothing but what transitions are computed from. */
export function summarizePod(object: KubeObject): PodSummary {
  const metadata = object.metadata ?? {};
  const { spec = {}, status = {} } = object as RawPod;
  const statuses = [...(status.initContainerStatuses ?? []), ...(status.containerStatuses ?? [])];
  return {
    key: objectKey(metadata.namespace, metadata.name),
    uid: text(metadata.uid),
    resourceVersion: text(metadata.resourceVersion),
    name: text(metadata.name),
    namespace: text(metadata.namespace),
    node: text(spec.nodeName),
    phase: text(status.phase),
    reason: text(status.reason),
    message: text(status.message),
    owner: controllerOf(metadata['ownerReferences']),
    containers: statuses.map(summarizeContainer),
  };
}

const transition = (
  reason: LifecycleReason,
  fields: Partial<Omit<LifecycleTransition, 'reason'>> = {},
): LifecycleTransition => ({
  reason,
  container: '',
  restartCount: 0,
  exitCode: 0,
  terminationReason: '',
  message: '',
  ...fields,
});

const WAITING_REASONS: Readonly<Record<string, LifecycleReason>> = {
  CrashLoopBackOff: 'CRASH_LOOP_BACK_OFF',
  ImagePullBackOff: 'IMAGE_PULL_BACK_OFF',
  ErrImagePull: 'ERR_IMAGE_PULL',
};

/** An OOM kill shows as the current termination, or as the last one after a restart. */
function oomKill(restarted: boolean, now: ContainerSummary): LifecycleTransition | undefined {
  const current = now.state === 'terminated' && now.reason === 'OOMKilled';
  if (!current && !(restarted && now.last?.reason === 'OOMKilled')) return undefined;
  // Keyed by the instance that was killed, so the same kill seen first as the current state
  // and then as the last state after the restart is one transition.
  return transition('OOM_KILLED', {
    container: now.name,
    restartCount: current ? now.restartCount : now.restartCount - 1,
    exitCode: current ? now.exitCode : (now.last?.exitCode ?? 0),
    terminationReason: 'OOMKilled',
  });
}

function waitingTransition(now: ContainerSummary): LifecycleTransition | undefined {
  const reason = now.state === 'waiting' ? WAITING_REASONS[now.reason] : undefined;
  if (reason === undefined) return undefined;
  return transition(reason, {
    container: now.name,
    restartCount: now.restartCount,
    exitCode: now.last?.exitCode ?? 0,
    terminationReason: now.last?.reason ?? '',
    message: now.message,
  });
}

function containerTransitions(
  before: ContainerSummary | undefined,
  now: ContainerSummary,
): LifecycleTransition[] {
  const common = { container: now.name, restartCount: now.restartCount };
  const restarted = before !== undefined && now.restartCount > before.restartCount;
  const started =
    now.state === 'running' && (before?.state !== 'running' || restarted)
      ? transition('STARTED', common)
      : undefined;
  const completed =
    now.state === 'terminated' && now.reason === 'Completed' && now.exitCode === 0
      ? transition('COMPLETED', { ...common, terminationReason: 'Completed' })
      : undefined;
  return [started, oomKill(restarted, now), waitingTransition(now), completed].filter(
    (t): t is LifecycleTransition => t !== undefined,
  );
}

/**
 * The transitions from `before` to `now` (`before` undefined: a new pod; `now` undefined: a
 * deleted one). Not yet filtered for repeats: see LifecycleTracker.
 */
export function podTransitions(
  before: PodSummary | undefined,
  now: PodSummary | undefined,
): LifecycleTransition[] {
  if (now === undefined) return before === undefined ? [] : [transition('DELETED')];
  const found: LifecycleTransition[] = [];
  if (before === undefined) found.push(transition('CREATED'));
  if (now.reason === 'Evicted') found.push(transition('EVICTED', { message: now.message }));
  for (const container of now.containers) {
    const previous = before?.containers.find((c) => c.name === container.name);
    found.push(...containerTransitions(previous, container));
  }
  return found;
}

const transitionKey = (t: LifecycleTransition): string =>
  `${t.reason}|${t.container}|${String(t.restartCount)}`;

/** Remembers, per pod UID, the transitions already reported. */
export class LifecycleTracker {
  readonly #seen = new Map<string, Set<string>>();

  /** The transitions not reported before for this pod; remembers them. */
  fresh(uid: string, transitions: readonly LifecycleTransition[]): LifecycleTransition[] {
    let seen = this.#seen.get(uid);
    if (seen === undefined) {
      seen = new Set();
      this.#seen.set(uid, seen);
    }
    const fresh: LifecycleTransition[] = [];
    for (const t of transitions) {
      const key = transitionKey(t);
      if (seen.has(key)) continue;
      seen.add(key);
      fresh.push(t);
    }
    return fresh;
  }

  /** Marks what a pod already shows as reported (first sight at start: nothing is new). */
  baseline(uid: string, transitions: readonly LifecycleTransition[]): void {
    this.fresh(uid, transitions);
  }

  forget(uid: string): void {
    this.#seen.delete(uid);
  }
}
