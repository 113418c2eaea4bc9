// exec.pod.rules: which pods and containers a console may open on. Pure: the first rule that
// matches names itself in the audit record. Patterns are a name, a prefix ending in "*", or "*"
// (shared/config/kube-names.ts); an empty names or containers list means every one.

export interface ExecPodRuleConfig {
  readonly id: string;
  readonly namespace: string;
  readonly names: readonly string[];
  readonly containers: readonly string[];
}

export interface PodConsoleTarget {
  readonly namespace: string;
  readonly pod: string;
  readonly container: string;
}

export function matchesPattern(pattern: string, value: string): boolean {
  if (pattern === '*') return true;
  if (pattern.endsWith('*')) return value.startsWith(pattern.slice(0, -1));
  return pattern === value;
}

const matchesAny = (patterns: readonly string[], value: string) =>
  patterns.length === 0 || patterns.some((pattern) => matchesPattern(pattern, value));

/** The id of the first rule that allows the target, or undefined (refused). */
export function allowingRule(
  rules: readonly ExecPodRuleConfig[],
  target: PodConsoleTarget,
): string | undefined {
  for (const rule of rules) {
    // A rule without a namespace is a config error while consoles are on; never match it.
    if (rule.namespace === '' || !matchesPattern(rule.namespace, target.namespace)) continue;
    if (!matchesAny(rule.names, target.pod)) continue;
    if (!matchesAny(rule.containers, target.container)) continue;
    return rule.id;
  }
  return undefined;
}
