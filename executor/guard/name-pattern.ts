// The name patterns of the executor's rules (mutate.node.nodes, mutate.rules names and
// namespace), as the config check accepts them (shared/config/kube-names.ts): a name, a prefix
// ending in "*", or "*" alone for every name. Nothing else is a pattern here.

/** Whether one pattern matches a name. An empty pattern matches nothing. */
export function matchesNamePattern(pattern: string, name: string): boolean {
  const trimmed = pattern.trim();
  if (trimmed === '') return false;
  if (trimmed === '*') return true;
  if (trimmed.endsWith('*')) return name.startsWith(trimmed.slice(0, -1));
  return name === trimmed;
}

/** Whether any pattern of a list matches; an empty list matches nothing. */
export function matchesAnyNamePattern(patterns: readonly string[], name: string): boolean {
  return patterns.some((pattern) => matchesNamePattern(pattern, name));
}
