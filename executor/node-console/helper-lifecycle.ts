// The helper Pod's life with the executor's own identity: created, waited for until its container
// runs (under a deadline and the session's abort signal), and deleted. A helper that does not
// start is explained from its own status and events, so the refusal says why (an image that is
// not there, a node that does not exist, a kubelet that refused it).
import { setTimeout as sleep } from 'node:timers/promises';
import {
  ApiException,
  type CoreV1Api,
  type V1ContainerState,
  type V1Pod,
} from '@kubernetes/client-node';

/** Why a helper is not usable; the message is what the refusal or the log says. */
export class HelperNotReadyError extends Error {
  /** RBAC: the executor may not create or read helpers (the rbac.nodeShell Role is missing). */
  readonly forbidden: boolean;

  constructor(message: string, forbidden = false) {
    super(message);
    this.name = 'HelperNotReadyError';
    this.forbidden = forbidden;
  }
}

/** Container waiting reasons no wait can fix: refused at once instead of at the deadline. */
const HOPELESS_WAITING_REASONS = new Set([
  'ErrImageNeverPull',
  'InvalidImageName',
  'CreateContainerConfigError',
  'CreateContainerError',
  'RunContainerError',
]);

const POLL_MS = 500;
const MAX_EVENTS = 4;

const statusCode = (err: unknown): number => (err instanceof ApiException ? err.code : 0);

export async function createHelper(core: CoreV1Api, pod: V1Pod): Promise<V1Pod> {
  const namespace = pod.metadata?.namespace ?? '';
  try {
    return await core.createNamespacedPod({ namespace, body: pod });
  } catch (err: unknown) {
    const code = statusCode(err);
    if (code === 401 || code === 403) {
      throw new HelperNotReadyError(
        `the executor may not create helper Pods in namespace ${namespace} (API server answered ${code}): rbac.nodeShell grants it there`,
        true,
      );
    }
    throw new HelperNotReadyError(
      `the helper Pod could not be created in namespace ${namespace}: ${apiMessage(err)}`,
    );
  }
}

/** The API server's own message of a failed call (its Status), else the error's. */
function apiMessage(err: unknown): string {
  if (!(err instanceof ApiException)) return err instanceof Error ? err.message : String(err);
  const body: unknown = err.body;
  if (typeof body !== 'string') return `HTTP ${err.code}`;
  try {
    const parsed = JSON.parse(body) as { message?: unknown };
    return typeof parsed.message === 'string' ? parsed.message : `HTTP ${err.code}`;
  } catch {
    return body.slice(0, 200);
  }
}

const shellStatus = (pod: V1Pod) => pod.status?.containerStatuses?.find((c) => c.name === 'shell');

/** The shell container's waiting or terminated state, in words. */
function containerText(pod: V1Pod): string[] {
  const state = shellStatus(pod)?.state;
  const parts: string[] = [];
  const waiting = state?.waiting;
  if (waiting !== undefined) {
    parts.push(`container waiting: ${waiting.reason ?? ''} ${waiting.message ?? ''}`.trim());
  }
  const terminated = state?.terminated;
  if (terminated !== undefined) {
    parts.push(`container terminated: ${terminated.reason ?? ''} exit ${terminated.exitCode}`);
  }
  return parts;
}

/** One line about where the Pod stands: phase, the shell container's state, a failed condition. */
export function describeHelperStatus(pod: V1Pod): string {
  const status = pod.status;
  const parts = [`phase ${status?.phase ?? 'unknown'}`, ...containerText(pod)];
  if (status?.reason !== undefined) parts.push(`${status.reason}: ${status.message ?? ''}`);
  const failed = (status?.conditions ?? []).filter(
    (condition) => condition.status === 'False' && condition.message !== undefined,
  );
  for (const condition of failed) parts.push(`${condition.type}: ${condition.message ?? ''}`);
  return parts.join('; ');
}

const waitingReason = (state: V1ContainerState | undefined): string => state?.waiting?.reason ?? '';

type HelperVerdict = 'running' | 'ended' | 'cannot-start' | 'waiting';

/** Where a helper stands, as the wait acts on it. */
export function helperVerdict(pod: V1Pod | undefined): HelperVerdict {
  if (pod === undefined) return 'waiting';
  const phase = pod.status?.phase ?? '';
  if (phase === 'Failed' || phase === 'Succeeded') return 'ended';
  const state = shellStatus(pod)?.state;
  if (phase === 'Running' && state?.running !== undefined) return 'running';
  return HOPELESS_WAITING_REASONS.has(waitingReason(state)) ? 'cannot-start' : 'waiting';
}

/** The Pod's latest events, newest last (empty when they cannot be read). */
export async function helperEvents(
  core: CoreV1Api,
  namespace: string,
  name: string,
): Promise<string[]> {
  try {
    const list = await core.listNamespacedEvent({
      namespace,
      fieldSelector: `involvedObject.kind=Pod,involvedObject.name=${name}`,
    });
    const time = (e: (typeof list.items)[number]) =>
      new Date(e.lastTimestamp ?? e.eventTime ?? e.metadata.creationTimestamp ?? 0).getTime();
    return list.items
      .sort((a, b) => time(a) - time(b))
      .slice(-MAX_EVENTS)
      .map((e) => `${e.reason ?? ''}: ${e.message ?? ''}`.trim());
  } catch {
    // Events are an explanation, not a requirement: the status alone is reported then.
    return [];
  }
}

export interface HelperWait {
  readonly namespace: string;
  readonly name: string;
  readonly node: string;
  /** When to give up, as Date.now() milliseconds. */
  readonly deadlineMs: number;
  /** What the deadline is called in the refusal (the setting that set it). */
  readonly deadlineName: string;
  readonly signal: AbortSignal;
}

/** The helper as the API server has it; undefined on a transient error (the next poll decides). */
async function readHelper(core: CoreV1Api, wait: HelperWait, where: string) {
  try {
    return await core.readNamespacedPod({ name: wait.name, namespace: wait.namespace });
  } catch (err: unknown) {
    const code = statusCode(err);
    if (code === 404) {
      throw new HelperNotReadyError(
        `${where} was deleted before it ran (pods bound to a node that does not exist are removed by the cluster)`,
      );
    }
    if (code === 401 || code === 403) {
      throw new HelperNotReadyError(
        `the executor may not read ${where} (API server answered ${code})`,
        true,
      );
    }
    return undefined;
  }
}

/** Resolves once the helper's container runs; throws HelperNotReadyError otherwise. */
export async function waitForHelper(core: CoreV1Api, wait: HelperWait): Promise<void> {
  const where = `helper Pod ${wait.namespace}/${wait.name} on node ${wait.node}`;
  let last: V1Pod | undefined;
  while (Date.now() < wait.deadlineMs) {
    if (wait.signal.aborted) throw new HelperNotReadyError(`${where}: ${abortReason(wait.signal)}`);
    last = (await readHelper(core, wait, where)) ?? last;
    const verdict = helperVerdict(last);
    if (verdict === 'running') return;
    if (verdict === 'ended') {
      throw await notReady(core, wait, `${where} ended before the console could start`, last);
    }
    if (verdict === 'cannot-start') throw await notReady(core, wait, `${where} cannot start`, last);
    try {
      await sleep(Math.min(POLL_MS, Math.max(0, wait.deadlineMs - Date.now())), undefined, {
        signal: wait.signal,
      });
    } catch {
      throw new HelperNotReadyError(`${where}: ${abortReason(wait.signal)}`);
    }
  }
  throw await notReady(
    core,
    wait,
    `${where} was not running within ${wait.deadlineName}, image pull included`,
    last,
  );
}

function abortReason(signal: AbortSignal): string {
  const reason: unknown = signal.reason;
  return reason instanceof Error ? reason.message : 'the console open was abandoned';
}

async function notReady(
  core: CoreV1Api,
  wait: HelperWait,
  what: string,
  pod: V1Pod | undefined,
): Promise<HelperNotReadyError> {
  const events = await helperEvents(core, wait.namespace, wait.name);
  const status = pod === undefined ? 'never read' : describeHelperStatus(pod);
  const eventText = events.length === 0 ? '' : `; events: ${events.join(' | ')}`;
  return new HelperNotReadyError(`${what}: ${status}${eventText}`);
}

/** Deletes a helper at once (no grace: it only runs sleep). A helper already gone is fine. */
export async function deleteHelper(
  core: CoreV1Api,
  namespace: string,
  name: string,
): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await core.deleteNamespacedPod({ name, namespace, gracePeriodSeconds: 0 });
      return;
    } catch (err: unknown) {
      if (statusCode(err) === 404) return;
      if (attempt >= 3) throw err;
      await sleep(500 * attempt);
    }
  }
}
