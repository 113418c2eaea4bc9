// kubectl drain's pod filters (kubernetes/kubectl pkg/drain/filters.go), in kubectl's order, with
// the first filter that does not delete deciding: DaemonSet, mirror, local storage (emptyDir),
// unreplicated. The agent's own Pod comes first and is never evicted. DaemonSet pods are always
// skipped (kubectl's --ignore-daemonsets): a drain cannot remove them, the controller would put
// them back. Terminal pods (Succeeded, Failed) pass the DaemonSet, emptyDir and controller
// filters, as in kubectl.
import type { V1Pod } from '@kubernetes/client-node';

export type SkipReason = 'agent_self' | 'daemonset' | 'mirror';
export type RefuseReason =
  'needs_force' | 'needs_emptydir' | 'daemonset_missing' | 'daemonset_error';
/** Why a pod is evicted although a filter warned: kubectl's WARNING lines. */
export type EvictNote = '' | 'forced' | 'emptydir_deleted' | 'daemonset_missing_forced';

export type PodDecision =
  | { readonly action: 'evict'; readonly note: EvictNote }
  | { readonly action: 'skip'; readonly reason: SkipReason; readonly message: string }
  | { readonly action: 'refuse'; readonly reason: RefuseReason; readonly message: string };

export interface DrainFilterOptions {
  readonly force: boolean;
  readonly deleteEmptydirData: boolean;
  /** The agent's own Pod (namespace/name), when the executor knows it. */
  readonly self?: { readonly namespace: string; readonly name: string } | undefined;
}

/** The DaemonSet lookup kubectl does: does the pod's DaemonSet still exist? */
export type DaemonSetExists = (namespace: string, name: string) => Promise<boolean>;

const MIRROR_ANNOTATION = 'kubernetes.io/config.mirror';

const isTerminal = (pod: V1Pod) =>
  pod.status?.phase === 'Succeeded' || pod.status?.phase === 'Failed';

const controllerOf = (pod: V1Pod) =>
  pod.metadata?.ownerReferences?.find((owner) => owner.controller === true);

type FilterStep = PodDecision | { readonly action: 'next'; readonly note: EvictNote };

const isSelf = (pod: V1Pod, self: DrainFilterOptions['self']) =>
  self?.namespace === (pod.metadata?.namespace ?? '') && self.name === (pod.metadata?.name ?? '');

/** daemonSetFilter: skip DaemonSet pods; one whose DaemonSet is gone needs force. */
async function daemonSetFilter(
  pod: V1Pod,
  options: DrainFilterOptions,
  daemonSetExists: DaemonSetExists,
): Promise<FilterStep> {
  const controller = controllerOf(pod);
  if (controller?.kind !== 'DaemonSet' || isTerminal(pod)) return { action: 'next', note: '' };
  const namespace = pod.metadata?.namespace ?? '';
  let exists: boolean;
  try {
    exists = await daemonSetExists(namespace, controller.name);
  } catch (err: unknown) {
    return {
      action: 'refuse',
      reason: 'daemonset_error',
      message: `cannot read DaemonSet ${namespace}/${controller.name}: ${String(err)}`,
    };
  }
  if (exists) {
    return {
      action: 'skip',
      reason: 'daemonset',
      message: 'DaemonSet-managed Pods are not evicted',
    };
  }
  if (!options.force) {
    return {
      action: 'refuse',
      reason: 'daemonset_missing',
      message: `its DaemonSet ${controller.name} is gone (use force to override)`,
    };
  }
  return { action: 'next', note: 'daemonset_missing_forced' };
}

/** mirrorPodFilter: static pods cannot be deleted through the API server. */
function mirrorPodFilter(pod: V1Pod): FilterStep {
  if (pod.metadata?.annotations?.[MIRROR_ANNOTATION] === undefined)
    return { action: 'next', note: '' };
  return {
    action: 'skip',
    reason: 'mirror',
    message: 'a mirror (static) Pod cannot be deleted through the API server',
  };
}

/** localStorageFilter: emptyDir data is lost, so it needs delete_emptydir_data. */
function localStorageFilter(pod: V1Pod, options: DrainFilterOptions): FilterStep {
  const hasEmptyDir = (pod.spec?.volumes ?? []).some((volume) => volume.emptyDir !== undefined);
  if (!hasEmptyDir || isTerminal(pod)) return { action: 'next', note: '' };
  if (options.deleteEmptydirData) return { action: 'next', note: 'emptydir_deleted' };
  return {
    action: 'refuse',
    reason: 'needs_emptydir',
    message: 'it has local storage (emptyDir); use delete_emptydir_data to override',
  };
}

/** unreplicatedFilter: nothing recreates a pod without a controller, so it needs force. */
function unreplicatedFilter(pod: V1Pod, options: DrainFilterOptions): FilterStep {
  if (isTerminal(pod) || controllerOf(pod) !== undefined) return { action: 'next', note: '' };
  if (options.force) return { action: 'next', note: 'forced' };
  return {
    action: 'refuse',
    reason: 'needs_force',
    message: 'it declares no controller; use force to override',
  };
}

export async function decideForPod(
  pod: V1Pod,
  options: DrainFilterOptions,
  daemonSetExists: DaemonSetExists,
): Promise<PodDecision> {
  if (isSelf(pod, options.self)) {
    return {
      action: 'skip',
      reason: 'agent_self',
      message: "the agent's own Pod is never evicted",
    };
  }
  const steps: (() => FilterStep | Promise<FilterStep>)[] = [
    () => daemonSetFilter(pod, options, daemonSetExists),
    () => mirrorPodFilter(pod),
    () => localStorageFilter(pod, options),
    () => unreplicatedFilter(pod, options),
  ];
  // As kubectl: the first filter that does not delete decides; the last warning is the one kept.
  let note: EvictNote = '';
  for (const step of steps) {
    const result = await step();
    if (result.action !== 'next') return result;
    if (result.note !== '') note = result.note;
  }
  return { action: 'evict', note };
}
