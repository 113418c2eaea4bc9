// Drain, as kubectl drain does it (kubernetes/kubectl pkg/drain, pkg/cmd/drain), with the
// differences the seed asks for: a drain that would be refused (pods needing force or
// delete_emptydir_data) changes nothing, so the pods are filtered BEFORE the cordon; the agent's
// own Pod is never evicted; a pod already terminating is waited for, not evicted again.
//
// Flow: list and filter (refuse: stop, nothing written) -> cordon (unless already cordoned) ->
// list and filter again (what kubectl sees after its cordon) -> evict every pod concurrently,
// retrying 429 (PodDisruptionBudget) every 5 s, each re-read before its retry -> wait for each
// pod to be gone (or replaced: another UID), polling every second -> result. The timeout covers
// the whole job; on timeout or cancel the node stays cordoned, as with kubectl.
import { setTimeout as sleep } from 'node:timers/promises';
import type { V1Pod } from '@kubernetes/client-node';
import { PodPhase } from '../../proto/index.js';
import { statusOf, type KubeResponse } from '../kube/kube-http.js';
import { decideForPod, type DrainFilterOptions, type PodDecision } from './drain-filters.js';
import type { NodeApi } from './node-api.js';

/** kubectl's EvictErrorRetryDelay: no flag exposes it. */
export const EVICT_RETRY_DELAY_MS = 5_000;
/** kubectl's waitForDelete poll interval. */
export const DELETE_POLL_INTERVAL_MS = 1_000;

export interface DrainRequest extends DrainFilterOptions {
  readonly node: string;
  readonly gracePeriodSeconds: number | undefined;
  readonly podSelector: string;
  readonly dryRun: boolean;
}

export interface PodProgress {
  readonly namespace: string;
  readonly name: string;
  readonly phase: PodPhase;
  readonly reason: string;
  readonly pdb: string;
  readonly message: string;
}

export type DrainOutcome = 'succeeded' | 'refused' | 'failed' | 'timed_out' | 'cancelled';

export interface DrainResult {
  readonly outcome: DrainOutcome;
  readonly message: string;
  readonly cordoned: boolean;
  readonly pending: readonly string[];
  readonly evicted: number;
  readonly skipped: number;
  readonly refused: number;
}

export interface DrainDeps {
  readonly api: NodeApi;
  readonly emit: (progress: PodProgress) => void;
  /** Aborted with reason 'timeout' or 'cancelled'. */
  readonly signal: AbortSignal;
  readonly retryDelayMs?: number;
  readonly pollIntervalMs?: number;
}

const idOf = (pod: V1Pod) => ({
  namespace: pod.metadata?.namespace ?? '',
  name: pod.metadata?.name ?? '',
});
/** Read through a call, so a check after an await is not narrowed away by one before it. */
const stopped = (signal: AbortSignal) => signal.aborted;

const keyOf = (pod: V1Pod) => `${pod.metadata?.namespace ?? ''}/${pod.metadata?.name ?? ''}`;

interface Classified {
  readonly pod: V1Pod;
  readonly decision: PodDecision;
}

/** What the pod filters say about every pod of the node. */
async function classify(
  request: DrainRequest,
  api: NodeApi,
  signal: AbortSignal,
): Promise<Classified[]> {
  const pods = await api.listPodsOnNode(request.node, request.podSelector, signal);
  const out: Classified[] = [];
  for (const pod of pods) {
    out.push({
      pod,
      decision: await decideForPod(pod, request, (ns, name) => api.daemonSetExists(ns, name)),
    });
  }
  return out;
}

/** Sleeps unless the signal aborts first; resolves false when it aborted. */
async function pause(ms: number, signal: AbortSignal): Promise<boolean> {
  try {
    await sleep(ms, undefined, { signal });
    return true;
  } catch {
    return false;
  }
}

/** "The disruption budget web-pdb needs 1 healthy pods…" -> "web-pdb". */
function budgetName(causes: readonly { type: string; message: string }[], message: string): string {
  for (const text of [...causes.map((cause) => cause.message), message]) {
    const match = /disruption budget ([a-z0-9.-]+)/i.exec(text);
    if (match?.[1] !== undefined) return match[1];
  }
  return '';
}

type PodEnd = 'deleted' | 'dry_run' | 'failed' | 'pending';

interface EmitFields {
  readonly reason?: string;
  readonly message?: string;
  readonly pdb?: string;
}

/** What one eviction answer means for the pod. */
type EvictStep = { readonly end: PodEnd } | { readonly wait: true } | { readonly retry: true };

/** One drain's evictions: the per-pod loops share the request, the API and the signal. */
class Evictions {
  evicted = 0;
  readonly #request: DrainRequest;
  readonly #deps: DrainDeps;
  readonly #retryDelayMs: number;
  readonly #pollIntervalMs: number;

  constructor(request: DrainRequest, deps: DrainDeps) {
    this.#request = request;
    this.#deps = deps;
    this.#retryDelayMs = deps.retryDelayMs ?? EVICT_RETRY_DELAY_MS;
    this.#pollIntervalMs = deps.pollIntervalMs ?? DELETE_POLL_INTERVAL_MS;
  }

  emit(pod: V1Pod, phase: PodPhase, fields: EmitFields = {}): void {
    this.#deps.emit({
      namespace: pod.metadata?.namespace ?? '',
      name: pod.metadata?.name ?? '',
      phase,
      reason: fields.reason ?? '',
      pdb: fields.pdb ?? '',
      message: fields.message ?? '',
    });
  }

  /** The pod as the API server has it now; 'aborted' when the drain stopped meanwhile. */
  async #read(pod: V1Pod): Promise<V1Pod | undefined | 'aborted'> {
    const signal = this.#deps.signal;
    try {
      return await this.#deps.api.getPod(
        pod.metadata?.namespace ?? '',
        pod.metadata?.name ?? '',
        signal,
      );
    } catch (err: unknown) {
      if (signal.aborted) return 'aborted';
      throw err;
    }
  }

  /** Gone, or replaced by a pod of the same name (another UID), counts as deleted. */
  #goneNow(pod: V1Pod, current: V1Pod | undefined): boolean {
    if (current !== undefined && current.metadata?.uid === pod.metadata?.uid) return false;
    this.emit(pod, PodPhase.POD_PHASE_DELETED, {
      reason: current === undefined ? 'gone' : 'replaced',
    });
    return true;
  }

  /** kubectl's waitForDelete: poll every second until the pod is gone or the drain stops. */
  async waitForDelete(pod: V1Pod): Promise<PodEnd> {
    for (;;) {
      const current = await this.#read(pod);
      if (current === 'aborted') return 'pending';
      if (this.#goneNow(pod, current)) return 'deleted';
      if (!(await pause(this.#pollIntervalMs, this.#deps.signal))) return 'pending';
    }
  }

  #accepted(pod: V1Pod, note: string): EvictStep {
    this.evicted++;
    if (this.#request.dryRun) {
      this.emit(pod, PodPhase.POD_PHASE_EVICTED, {
        reason: 'dry_run',
        message: 'the API server accepted the eviction as a dry run',
      });
      return { end: 'dry_run' };
    }
    this.emit(pod, PodPhase.POD_PHASE_EVICTED, { reason: note });
    return { wait: true };
  }

  #answer(pod: V1Pod, current: V1Pod, response: KubeResponse, note: string): EvictStep {
    const status = statusOf(response);
    if (response.status === 200 || response.status === 201) return this.#accepted(pod, note);
    if (response.status === 404) {
      this.emit(pod, PodPhase.POD_PHASE_DELETED, { reason: 'gone' });
      return { end: 'deleted' };
    }
    if (response.status === 429) {
      this.emit(pod, PodPhase.POD_PHASE_BLOCKED_BY_PDB, {
        reason: status.reason === '' ? 'TooManyRequests' : status.reason,
        message: `${status.message} (retrying in ${String(this.#retryDelayMs / 1000)} s)`,
        pdb: budgetName(status.causes, status.message),
      });
      return { retry: true };
    }
    const namespaceTerminating =
      response.status === 403 &&
      (status.reason === 'NamespaceTerminating' ||
        status.causes.some((cause) => cause.type === 'NamespaceTerminating'));
    if (!namespaceTerminating) {
      // 500 (several budgets select the pod), 403 (RBAC) and everything else fail this pod.
      this.emit(pod, PodPhase.POD_PHASE_FAILED, {
        reason: status.reason === '' ? `http_${String(response.status)}` : status.reason,
        message: status.message,
      });
      return { end: 'failed' };
    }
    if (current.metadata?.deletionTimestamp === undefined) return { retry: true };
    this.emit(pod, PodPhase.POD_PHASE_TERMINATING, {
      reason: 'namespace_terminating',
      message: status.message,
    });
    return { wait: true };
  }

  /** One eviction request; 'pending' when the drain stopped, 'failed' when it could not be sent. */
  async #send(pod: V1Pod, note: string): Promise<KubeResponse | 'pending' | 'failed'> {
    const { api, signal } = this.#deps;
    try {
      return await api.evictPod(
        idOf(pod),
        { gracePeriodSeconds: this.#request.gracePeriodSeconds, dryRun: this.#request.dryRun },
        signal,
      );
    } catch (err: unknown) {
      if (stopped(signal)) return 'pending';
      this.emit(pod, PodPhase.POD_PHASE_FAILED, {
        reason: 'error',
        message: `${note} ${String(err)}`.trim(),
      });
      return 'failed';
    }
  }

  /** A pod already terminating is waited for, not evicted again (a dry run evicts it as is). */
  #alreadyTerminating(pod: V1Pod): boolean {
    if (pod.metadata?.deletionTimestamp === undefined || this.#request.dryRun) return false;
    this.emit(pod, PodPhase.POD_PHASE_TERMINATING, {
      reason: 'already_terminating',
      message: 'waiting for it to go, not evicting it again',
    });
    return true;
  }

  /** kubectl's evictPods loop for one pod. */
  async evict(pod: V1Pod, note: string): Promise<PodEnd> {
    const signal = this.#deps.signal;
    if (this.#alreadyTerminating(pod)) return this.waitForDelete(pod);
    let current = pod;
    this.emit(pod, PodPhase.POD_PHASE_EVICTING, { reason: note });
    for (;;) {
      if (stopped(signal)) return 'pending';
      const response = await this.#send(pod, note);
      if (typeof response === 'string') return response;
      const step = this.#answer(pod, current, response, note);
      if ('end' in step) return step.end;
      if ('wait' in step) return this.waitForDelete(current);
      if (!(await pause(this.#retryDelayMs, signal))) return 'pending';
      // kubectl re-reads the pod before each retry: it may be gone or replaced meanwhile.
      const fresh = await this.#read(pod);
      if (fresh === 'aborted') return 'pending';
      if (this.#goneNow(pod, fresh)) return 'deleted';
      current = fresh ?? current;
    }
  }
}

/** Emits SKIPPED and REFUSED for the pods the filters keep. */
function emitDecisions(evictions: Evictions, entries: readonly Classified[]): void {
  for (const { pod, decision } of entries) {
    if (decision.action === 'skip') evictions.emit(pod, PodPhase.POD_PHASE_SKIPPED, decision);
    if (decision.action === 'refuse') evictions.emit(pod, PodPhase.POD_PHASE_REFUSED, decision);
  }
}

const refusedList = (entries: readonly Classified[]) =>
  entries
    .map(
      ({ pod, decision }) =>
        `${keyOf(pod)} (${decision.action === 'refuse' ? decision.reason : ''})`,
    )
    .join(', ');

function finalResult(
  request: DrainRequest,
  signal: AbortSignal,
  ends: readonly { key: string; end: PodEnd | 'skipped' }[],
  base: Omit<DrainResult, 'outcome' | 'message' | 'pending'>,
): DrainResult {
  const pending = ends.filter((e) => e.end === 'pending' || e.end === 'failed').map((e) => e.key);
  const failed = ends.filter((e) => e.end === 'failed').map((e) => e.key);
  const withPending = { ...base, pending };
  if (failed.length > 0) {
    return {
      ...withPending,
      outcome: 'failed',
      message: `evicting failed for ${failed.join(', ')}`,
    };
  }
  if (signal.aborted && pending.length > 0) {
    const timedOut = String(signal.reason) === 'timeout';
    return {
      ...withPending,
      outcome: timedOut ? 'timed_out' : 'cancelled',
      message: `${timedOut ? 'global timeout reached' : 'cancelled'}; pending: ${pending.join(', ')}`,
    };
  }
  return {
    ...withPending,
    outcome: 'succeeded',
    message: request.dryRun
      ? `dry run: ${request.node} would be drained (${String(base.evicted)} evictions accepted)`
      : `${request.node} drained`,
  };
}

export async function runDrain(request: DrainRequest, deps: DrainDeps): Promise<DrainResult> {
  const { api, signal } = deps;
  const evictions = new Evictions(request, deps);
  const count = (entries: readonly Classified[], action: PodDecision['action']) =>
    entries.filter((entry) => entry.decision.action === action);

  // 1. Filter before anything is written: a refused drain changes nothing.
  const node = await api.getNode(request.node, signal);
  let cordoned = node?.spec?.unschedulable === true;
  const before = await classify(request, api, signal);
  const refusedBefore = count(before, 'refuse');
  if (refusedBefore.length > 0) {
    emitDecisions(evictions, refusedBefore);
    return {
      outcome: 'refused',
      message: `cannot drain ${request.node}: ${refusedList(refusedBefore)}; nothing was changed`,
      cordoned,
      pending: [],
      evicted: 0,
      skipped: count(before, 'skip').length,
      refused: refusedBefore.length,
    };
  }

  // 2. Cordon (kubectl: "already cordoned" sends nothing). A failed cordon is fatal. A dry run
  // leaves the node as it was.
  if (!cordoned) {
    const written = await api.setUnschedulable(request.node, true, request.dryRun);
    cordoned = !request.dryRun && written.spec?.unschedulable === true;
  }

  // 3. The pods as kubectl sees them after its cordon (a pod may have arrived meanwhile).
  const after = await classify(request, api, signal);
  emitDecisions(evictions, after);
  const skipped = count(after, 'skip').length;
  const refusedAfter = count(after, 'refuse');
  if (refusedAfter.length > 0) {
    return {
      outcome: 'refused',
      message: `cannot drain ${request.node}: pods that need options arrived after the cordon: ${refusedList(refusedAfter)}; the node stays cordoned`,
      cordoned,
      pending: [],
      evicted: 0,
      skipped,
      refused: refusedAfter.length,
    };
  }

  // 4. Evict every pod concurrently, as kubectl's evictPods does.
  const ends = await Promise.all(
    after.map(async ({ pod, decision }) =>
      decision.action === 'evict'
        ? { key: keyOf(pod), end: await evictions.evict(pod, decision.note) }
        : { key: keyOf(pod), end: 'skipped' as const },
    ),
  );
  return finalResult(request, signal, ends, {
    cordoned,
    evicted: evictions.evicted,
    skipped,
    refused: 0,
  });
}
