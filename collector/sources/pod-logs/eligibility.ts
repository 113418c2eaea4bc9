// Which containers of a pod are collected, by which merged settings. Pure: table-tested.
import type { V1Pod } from '@kubernetes/client-node';
import { minimatch } from 'minimatch';
import { parseFieldSelector, parseLabelSelector } from './selectors.js';

/** One collect.logs rule as the config gives it (blank fields mean "not set"). */
export interface LogRuleConfig {
  readonly id: string;
  readonly namespace: string;
  readonly pod_names: readonly string[];
  readonly label_selector: string;
  readonly field_selector: string;
  readonly containers: readonly string[];
  readonly follow?: boolean | undefined;
  readonly tail_lines?: number | undefined;
}

export interface EligibilityConfig {
  readonly tail_lines: number;
  readonly follow: boolean;
  readonly exclude_namespaces: readonly string[];
  readonly rules: readonly LogRuleConfig[];
}

/** A container to collect, with the settings of every rule that selected it merged. */
export interface ContainerTarget {
  readonly container: string;
  /** The largest tail_lines of the matching rules. */
  readonly tailLines: number;
  /** True if any matching rule follows. */
  readonly follow: boolean;
  readonly ruleIds: readonly string[];
}

interface CompiledRule {
  readonly id: string;
  readonly namespace: string;
  readonly podNames: readonly string[];
  readonly containers: readonly string[];
  readonly labels: ReturnType<typeof parseLabelSelector>;
  readonly fields: ReturnType<typeof parseFieldSelector>;
  readonly follow: boolean;
  readonly tailLines: number;
}

const GLOB = { dot: true, nocomment: true, nonegate: true } as const;

const nonBlank = (values: readonly string[]): string[] =>
  values.map((v) => v.trim()).filter((v) => v !== '');

function isBlankRule(rule: LogRuleConfig): boolean {
  return (
    rule.namespace.trim() === '' &&
    nonBlank(rule.pod_names).length === 0 &&
    rule.label_selector.trim() === '' &&
    rule.field_selector.trim() === '' &&
    nonBlank(rule.containers).length === 0 &&
    rule.follow === undefined &&
    rule.tail_lines === undefined
  );
}

/**
 * Compiles the rules once. A blank rule entry is no rule; when every entry is blank, the first
 * one stands for "everything" (as config normalisation does for an empty list).
 */
export function compileEligibility(config: EligibilityConfig): (pod: V1Pod) => ContainerTarget[] {
  const excluded = new Set(config.exclude_namespaces);
  const named = config.rules.filter((rule) => !isBlankRule(rule));
  const rules: CompiledRule[] = (named.length > 0 ? named : config.rules.slice(0, 1)).map(
    (rule) => ({
      id: rule.id,
      namespace: rule.namespace.trim(),
      podNames: nonBlank(rule.pod_names),
      containers: nonBlank(rule.containers),
      labels: parseLabelSelector(rule.label_selector),
      fields: parseFieldSelector(rule.field_selector),
      follow: rule.follow ?? config.follow,
      tailLines: rule.tail_lines ?? config.tail_lines,
    }),
  );
  return (pod) => {
    if (!isPodEligible(pod, excluded)) return [];
    const merged = new Map<string, ContainerTarget>();
    for (const rule of rules) {
      if (!ruleSelectsPod(rule, pod)) continue;
      for (const container of loggableContainers(pod)) {
        if (selectsContainer(rule, container)) merge(merged, container, rule);
      }
    }
    return [...merged.values()];
  };
}

function selectsContainer(rule: CompiledRule, container: string): boolean {
  return rule.containers.length === 0 || rule.containers.some((g) => minimatch(container, g, GLOB));
}

/** Overlapping rules: the largest tail, follow if any, every rule id. */
function merge(merged: Map<string, ContainerTarget>, container: string, rule: CompiledRule): void {
  const before = merged.get(container);
  merged.set(container, {
    container,
    tailLines: Math.max(before?.tailLines ?? 0, rule.tailLines),
    follow: (before?.follow ?? false) || rule.follow,
    ruleIds: [...(before?.ruleIds ?? []), rule.id],
  });
}

/** Not being deleted, phase known, namespace not excluded. */
export function isPodEligible(pod: V1Pod, excluded: ReadonlySet<string>): boolean {
  if (pod.metadata?.deletionTimestamp) return false;
  if (excluded.has(pod.metadata?.namespace ?? '')) return false;
  const phase = pod.status?.phase;
  return phase === 'Running' || phase === 'Pending' || phase === 'Succeeded' || phase === 'Failed';
}

function ruleSelectsPod(rule: CompiledRule, pod: V1Pod): boolean {
  const name = pod.metadata?.name ?? '';
  const namespace = pod.metadata?.namespace ?? '';
  if (rule.namespace !== '' && rule.namespace !== namespace) return false;
  if (rule.podNames.length > 0 && !rule.podNames.some((g) => minimatch(name, g, GLOB)))
    return false;
  if (!rule.labels(pod.metadata?.labels ?? {})) return false;
  return rule.fields(podFields(pod));
}

function podFields(pod: V1Pod): Record<string, string> {
  const { metadata = {}, spec = { containers: [] }, status = {} } = pod;
  const fields: Record<string, string | undefined> = {
    'metadata.name': metadata.name,
    'metadata.namespace': metadata.namespace,
    'spec.nodeName': spec.nodeName,
    'spec.restartPolicy': spec.restartPolicy,
    'spec.schedulerName': spec.schedulerName,
    'spec.serviceAccountName': spec.serviceAccountName,
    'status.phase': status.phase,
    'status.podIP': status.podIP,
    'status.nominatedNodeName': status.nominatedNodeName,
  };
  return Object.fromEntries(Object.entries(fields).map(([k, v]) => [k, v ?? '']));
}

/**
 * spec.containers with a status that has started, waits (CrashLoopBackOff included: its
 * previous output is still worth streaming) or ended; a Pending pod's containers before any
 * status exists are not yet loggable.
 */
export function loggableContainers(pod: V1Pod): string[] {
  const statuses = new Map((pod.status?.containerStatuses ?? []).map((s) => [s.name, s]));
  return (pod.spec?.containers ?? [])
    .map((c) => c.name)
    .filter((name) => {
      const state = statuses.get(name)?.state;
      if (!state) return false;
      if (state.running || state.terminated) return true;
      // Waiting: a restart in progress has output from its last run; a first start has none.
      return (statuses.get(name)?.restartCount ?? 0) > 0;
    });
}
