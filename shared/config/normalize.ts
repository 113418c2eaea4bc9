// Resolves the defaults that depend on other keys, once, at load: rule ids, default rules,
// "0 means 30s", query's per-field inheritance from collect.state. Components then read plain
// values and never re-implement an inheritance rule.
import type { RawConfig } from './schema.js';

/** Collector default for a metrics interval written as "0". */
const DEFAULT_METRICS_INTERVAL_MS = 30_000;
/** What exec.pod.resume_window_sec 0 stands for. */
const DEFAULT_RESUME_WINDOW_SEC = 60;
const DEFAULT_STATE_RESOURCES = ['pods', 'services', 'secrets', 'deployments'];
const DEFAULT_METRICS_RESOURCES = ['pods', 'nodes'];

/** Blank ids become `<prefix>-<index>`, the id every log line and decision names the rule by. */
function withIds<T extends { readonly id: string }>(rules: readonly T[], prefix: string): T[] {
  return rules.map((rule, index) => {
    const id = rule.id.trim();
    return { ...rule, id: id === '' ? `${prefix}-${index}` : id };
  });
}

/** Trimmed, without blanks and repeats, first occurrence kept. */
function cleanList(values: readonly string[]): string[] {
  return [...new Set(values.map((value) => value.trim()).filter((value) => value !== ''))];
}

/** `labels` is shorthand for an equality label_selector (the selector wins when both are set). */
function selectorFromLabels(selector: string, labels: Readonly<Record<string, string>>): string {
  if (selector.trim() !== '') return selector;
  return Object.keys(labels)
    .sort()
    .map((key) => `${key}=${labels[key] ?? ''}`)
    .join(',');
}

type RawCollect = RawConfig['collect'];

function normalizeLogs(logs: RawCollect['logs']) {
  const rules: RawCollect['logs']['rules'] =
    logs.enabled && logs.rules.length === 0
      ? [
          {
            id: '',
            namespace: '',
            pod_names: [],
            label_selector: '',
            field_selector: '',
            labels: {},
            containers: [],
          },
        ]
      : logs.rules;
  return {
    ...logs,
    exclude_namespaces: cleanList(logs.exclude_namespaces),
    rules: withIds(rules, 'logs').map((rule) => ({
      ...rule,
      label_selector: selectorFromLabels(rule.label_selector, rule.labels),
    })),
  };
}

function normalizeState(state: RawCollect['state']) {
  const rules: RawCollect['state']['rules'] =
    state.enabled && state.rules.length === 0
      ? [
          {
            id: '',
            namespace: '',
            resources: DEFAULT_STATE_RESOURCES,
            label_selector: '',
            field_selector: '',
          },
        ]
      : state.rules;
  return {
    ...state,
    rules: withIds(rules, 'state').map((rule) => ({
      ...rule,
      resources: cleanList(rule.resources),
    })),
  };
}

function normalizeMetrics(metrics: RawCollect['metrics']) {
  const wantsDefaultRule =
    metrics.rules.length === 0 &&
    (metrics.kube_metrics || (metrics.enabled && metrics.custom_endpoints.length === 0));
  const rules: RawCollect['metrics']['rules'] = wantsDefaultRule
    ? [
        {
          id: '',
          namespace: '',
          resources: DEFAULT_METRICS_RESOURCES,
          pod_names: [],
          node_names: [],
          label_selector: '',
          field_selector: '',
          labels: {},
        },
      ]
    : metrics.rules;
  return {
    ...metrics,
    pod_interval: metrics.pod_interval === 0 ? DEFAULT_METRICS_INTERVAL_MS : metrics.pod_interval,
    node_interval:
      metrics.node_interval === 0 ? DEFAULT_METRICS_INTERVAL_MS : metrics.node_interval,
    rules: withIds(rules, 'metrics').map((rule) => ({
      ...rule,
      resources: cleanList(rule.resources),
      label_selector: selectorFromLabels(rule.label_selector, rule.labels),
    })),
    custom_endpoints: metrics.custom_endpoints,
  };
}

/**
 * Per-field inheritance (seed: "omit to inherit collect.state entirely; set individual fields to
 * override just those"): enabled defaults to true, redact_secrets to collect.state's, and an
 * unset or empty rules list to collect.state.rules with no verb restriction.
 */
function normalizeQuery(query: RawConfig['query'], state: ReturnType<typeof normalizeState>) {
  const ownRules = query.rules ?? [];
  const rules =
    ownRules.length > 0
      ? withIds(ownRules, 'query').map((rule) => ({
          ...rule,
          resources: cleanList(rule.resources),
          verbs: cleanList(rule.verbs.map((verb) => verb.toLowerCase())),
        }))
      : state.rules.map((rule) => ({
          id: rule.id,
          namespace: rule.namespace,
          resources: rule.resources,
          names: [],
          verbs: [],
          label_selector: rule.label_selector,
          field_selector: rule.field_selector,
        }));
  return {
    enabled: query.enabled ?? true,
    redact_secrets: query.redact_secrets ?? state.redact_secrets,
    rules,
  };
}

function normalizeExecPod(pod: RawConfig['exec']['pod']) {
  return {
    ...pod,
    resume_window_sec:
      pod.resume_window_sec === 0 ? DEFAULT_RESUME_WINDOW_SEC : pod.resume_window_sec,
    rules: withIds(pod.rules, 'exec-pod'),
  };
}

/** The transform at the end of ConfigSchema. */
export function normalizeConfig(raw: RawConfig) {
  // security.profile strict: Secret values never leave the cluster, whatever redact_secrets says.
  const strict = raw.security.profile === 'strict';
  const state = normalizeState(
    strict ? { ...raw.collect.state, redact_secrets: true } : raw.collect.state,
  );
  return {
    ...raw,
    collect: {
      logs: normalizeLogs(raw.collect.logs),
      state,
      metrics: normalizeMetrics(raw.collect.metrics),
      events: {
        ...raw.collect.events,
        exclude_namespaces: cleanList(raw.collect.events.exclude_namespaces),
      },
    },
    query: normalizeQuery(strict ? { ...raw.query, redact_secrets: true } : raw.query, state),
    mutate: {
      ...raw.mutate,
      rules: withIds(raw.mutate.rules, 'mutate').map((rule) => ({
        ...rule,
        resources: cleanList(rule.resources),
        verbs: [...new Set(rule.verbs)],
      })),
      node: { ...raw.mutate.node, verbs: [...new Set(raw.mutate.node.verbs)] },
    },
    exec: { pod: normalizeExecPod(raw.exec.pod), node: raw.exec.node },
  };
}
