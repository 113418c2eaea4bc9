// Checks on rule lists that a field type cannot express: resource spellings, duplicate ids,
// bounds that apply only while a feature is on. Each reports through `add`, so the same check
// can raise a load error or, where the seed says so, only a warning.

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

export function notAResourceMessage(entry: string): string {
  return `"${entry}" is not a resource: write an alias such as pods or deployments, version/resource for the core group (v1/pods), or group/version/resource (apps/v1/deployments)`;
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
