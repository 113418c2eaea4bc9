// What the pod log source reads from a V1Pod (identity, restart count, container state) and how
// it asks for a log (resume, tail, or from the start). Pure functions of the pod object.
import type { V1Pod } from '@kubernetes/client-node';
import type { LinePosition } from './joiner.js';
import { lineTimeToSinceTime } from './line-time.js';
import type { RestartTimes } from './restart.js';

export type ContainerStateKind = 'running' | 'waiting' | 'terminated' | 'unknown';

/** Labels that only name a rollout's revision: not exported with a log entry. */
const DROPPED_LABELS = [
  'pod-template-hash',
  'controller-revision-hash',
  'batch.kubernetes.io/job-name',
];

/** The pod fields the source reads, with blanks for what is missing. */
export function podIdentity(pod: V1Pod) {
  const { uid = '', name = '', namespace = '', labels = {} } = pod.metadata ?? {};
  const exported = Object.fromEntries(
    Object.entries(labels).filter(([key]) => !DROPPED_LABELS.includes(key)),
  );
  return { uid, name, namespace, labels: exported, nodeName: pod.spec?.nodeName ?? '' };
}

/** The session key of a container: `<pod uid>/<container>`. */
export const containerKeyOf = (pod: V1Pod, container: string): string =>
  `${pod.metadata?.uid ?? ''}/${container}`;

export function restartCountOf(pod: V1Pod, container: string): number {
  return pod.status?.containerStatuses?.find((s) => s.name === container)?.restartCount ?? 0;
}

/** A status time as whole seconds; the watch hands times over as strings, not Dates. */
function secondOf(time: Date | string | undefined): number | undefined {
  const ms = time === undefined ? NaN : new Date(time).getTime();
  return Number.isFinite(ms) ? Math.floor(ms / 1000) : undefined;
}

/** When the previous instance finished and the current one started, by the pod status. */
export function restartTimesOf(pod: V1Pod, container: string): RestartTimes {
  const status = pod.status?.containerStatuses?.find((s) => s.name === container);
  const { running, terminated } = status?.state ?? {};
  return {
    previousFinishedSec: secondOf(status?.lastState?.terminated?.finishedAt),
    startedSec: secondOf(running?.startedAt ?? terminated?.startedAt),
  };
}

/** The container's state by the pod status, for the log line and the metric of a quiet stream. */
export function containerStateOf(
  pod: V1Pod,
  container: string,
): { kind: ContainerStateKind; text: string } {
  const state = pod.status?.containerStatuses?.find((s) => s.name === container)?.state;
  if (state?.waiting) return { kind: 'waiting', text: `waiting: ${state.waiting.reason ?? ''}` };
  if (state?.terminated) {
    return { kind: 'terminated', text: `terminated: ${state.terminated.reason ?? ''}` };
  }
  if (state?.running) return { kind: 'running', text: 'running' };
  return { kind: 'unknown', text: 'unknown' };
}

/** sinceTime (second precision) to resume, tailLines on first sight, nothing for a new instance. */
export function resumeOrTail(
  resumeAfter: LinePosition | undefined,
  tail: boolean,
  tailLines: number,
): { sinceTime?: Date; tailLines?: number } {
  if (resumeAfter) return { sinceTime: lineTimeToSinceTime(resumeAfter) };
  return tail ? { tailLines } : {};
}
