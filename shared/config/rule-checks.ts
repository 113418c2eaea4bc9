// Checks on rule lists that a field type cannot express: resource spellings, duplicate ids,
// bounds that apply only while a feature is on. Each reports through `add`, so the same check
// can raise a load error or, where the seed says so, only a warning.
import { parseResource } from './resources.js';

export type IssuePath = readonly (string | number)[];
export type AddIssue = (path: IssuePath, message: string) => void;

/** Rejects repeated explicit ids: a decision is logged by its rule id, which must be unambiguous. */
export function checkUniqueIds(
  rules: readonly { readonly id: string }[],
  path: IssuePath,
  add: AddIssue,
): void {
  const seen = new Set<string>();
  rules.forEach((rule, index) => {
    // An entry that failed its own checks may reach a cross-field check unparsed.
    const raw: unknown = (rule as Partial<typeof rule> | undefined)?.id;
    if (typeof raw !== 'string') return;
    const id = raw.trim();
    if (id === '') return;
    if (seen.has(id))
      add([...path, index, 'id'], `"${id}" is duplicated; give each rule its own id`);
    seen.add(id);
  });
}

/** A resource the agent can resolve, or any entry holding "*" (each rule kind judges those). */
export function isResourceSpelling(entry: string): boolean {
  return entry.includes('*') || parseResource(entry) !== undefined;
}

export function notAResourceMessage(entry: string): string {
  return `"${entry}" is not a resource: write an alias such as pods or deployments, version/resource for the core group (v1/pods), or group/version/resource (apps/v1/deployments)`;
}

function checkResourceList(
  resources: readonly string[],
  path: IssuePath,
  add: AddIssue,
  wildcard: (entry: string) => string | undefined,
): void {
  if (resources.length === 0) {
    add(path, 'list at least one resource, e.g. [pods]');
    return;
  }
  resources.forEach((entry, index) => {
    const refusal = wildcard(entry);
    if (refusal !== undefined) add([...path, index], refusal);
    else if (!isResourceSpelling(entry)) add([...path, index], notAResourceMessage(entry));
  });
}

/** collect.state.rules: watches need concrete resources; the bare "*" belongs to query.rules. */
export function checkStateRules(
  rules: readonly { readonly id: string; readonly resources: readonly string[] }[],
  path: IssuePath,
  add: AddIssue,
): void {
  rules.forEach((rule, index) => {
    checkResourceList(rule.resources, [...path, index, 'resources'], add, (entry) =>
      entry.includes('*')
        ? `"${entry}" is a wildcard, which only query.rules may use (a watch needs concrete resources); name them, e.g. [pods, deployments]`
        : undefined,
    );
  });
  checkUniqueIds(rules, path, add);
}

const METRICS_RESOURCES = new Set(['pods', 'pod', 'nodes', 'node']);

/** collect.metrics.rules: metrics.k8s.io serves pods and nodes only. */
export function checkMetricsRules(
  rules: readonly { readonly id: string; readonly resources: readonly string[] }[],
  path: IssuePath,
  add: AddIssue,
): void {
  rules.forEach((rule, index) => {
    const resourcesPath = [...path, index, 'resources'];
    if (rule.resources.length === 0) add(resourcesPath, 'list at least one of pods, nodes');
    rule.resources.forEach((entry, entryIndex) => {
      if (!METRICS_RESOURCES.has(entry.trim().toLowerCase())) {
        add([...resourcesPath, entryIndex], `"${entry}" is not supported; use pods or nodes`);
      }
    });
  });
  checkUniqueIds(rules, path, add);
}

/** Privileged rules (consoles, mutations) name their namespace; none defaults to all. */
export const NAMESPACE_REQUIRED_MESSAGE =
  'name a namespace or a pattern ("*" for every namespace); a privileged rule never defaults to all';

function checkNamespaceRequired(namespace: unknown, path: IssuePath, add: AddIssue): void {
  if (typeof namespace === 'string' && namespace.trim() === '') {
    add(path, NAMESPACE_REQUIRED_MESSAGE);
  }
}

/** Bounds of exec.pod's scalars, from the seed. */
export const EXEC_POD_LIMITS = {
  maxSessionSec: { min: 10, max: 86_400 },
  maxSessions: { min: 1, max: 64 },
  /** 0 means the default window, a negative value means no resume. */
  resumeWindowSec: { max: 600, zeroMeans: 60 },
} as const;

export interface ExecPodSection {
  readonly default_shell: string;
  readonly max_session_sec: number;
  readonly max_sessions: number;
  readonly resume_window_sec: number;
  readonly rules: readonly {
    readonly id: string;
    readonly namespace: string;
    readonly names: readonly string[];
    readonly containers: readonly string[];
  }[];
}

function checkRange(
  value: number,
  range: { readonly min: number; readonly max: number },
  path: IssuePath,
  add: AddIssue,
): void {
  if (value < range.min || value > range.max) {
    add(path, `${value} is out of range; use a value from ${range.min} to ${range.max}`);
  }
}

/**
 * exec.pod, rules and scalars. The caller decides whether these are errors (exec.pod or exec.node
 * enabled) or warnings (both off), as the seed specifies.
 */
export function checkExecPod(section: ExecPodSection, path: IssuePath, add: AddIssue): void {
  checkRange(
    section.max_session_sec,
    EXEC_POD_LIMITS.maxSessionSec,
    [...path, 'max_session_sec'],
    add,
  );
  checkRange(section.max_sessions, EXEC_POD_LIMITS.maxSessions, [...path, 'max_sessions'], add);
  if (section.resume_window_sec > EXEC_POD_LIMITS.resumeWindowSec.max) {
    add(
      [...path, 'resume_window_sec'],
      `${section.resume_window_sec} is too long; use at most ${EXEC_POD_LIMITS.resumeWindowSec.max} (0 means ${EXEC_POD_LIMITS.resumeWindowSec.zeroMeans}, a negative value turns resume off)`,
    );
  }
  if (section.default_shell.trim() === '') {
    add([...path, 'default_shell'], 'name the shell to start, e.g. /bin/sh');
  }
  section.rules.forEach((rule, index) => {
    const rulePath = [...path, 'rules', index];
    // The names' format is a field rule (schema.ts), checked whether consoles are on or not.
    checkNamespaceRequired(
      (rule as Partial<typeof rule> | undefined)?.namespace,
      [...rulePath, 'namespace'],
      add,
    );
  });
  checkUniqueIds(section.rules, [...path, 'rules'], add);
}
