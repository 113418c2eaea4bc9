// The names Kubernetes gives objects, so a config name or pattern that could never match one is
// refused at load (and by the chart's values schema, which copies these patterns) instead of
// silently matching nothing. Every pattern here is valid in JavaScript and in RE2 (helm).

/** A DNS-1123 label (63 characters at most): namespaces and container names. */
const LABEL = '[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?';
const SUBDOMAIN_PART = '[a-z0-9](?:[-a-z0-9]*[a-z0-9])?';
/** A DNS-1123 subdomain: pod and node names, most object names (253 characters: maxLength). */
const SUBDOMAIN = `${SUBDOMAIN_PART}(?:\\.${SUBDOMAIN_PART})*`;

export type NameKind = 'label' | 'subdomain';

export interface NameRule {
  /** What the name names, for messages: "namespace", "pod name". */
  readonly noun: string;
  readonly kind: NameKind;
}

const RULES: Readonly<Record<NameKind, { name: string; prefix: string; maxLength: number }>> = {
  label: { name: LABEL, prefix: '[a-z0-9][-a-z0-9]{0,61}', maxLength: 63 },
  subdomain: { name: SUBDOMAIN, prefix: '[a-z0-9][-a-z0-9.]*', maxLength: 253 },
};

function describeRule(kind: NameKind): string {
  return kind === 'label'
    ? 'lowercase letters, digits and "-", starting and ending with a letter or digit, at most 63 characters (DNS-1123 label)'
    : 'lowercase letters, digits, "-" and ".", starting and ending with a letter or digit, at most 253 characters (DNS-1123 subdomain)';
}

export interface NameFormat {
  /** Anchored; valid in JavaScript and RE2. */
  readonly pattern: string;
  readonly maxLength: number;
  /** The refusal after the quoted value. */
  readonly message: string;
}

/**
 * One name, or empty (where empty means "every"). `padded`: spaces and tabs around it are
 * allowed, for lists the loader trims.
 */
export function exactName(rule: NameRule, padded = false): NameFormat {
  const { name, maxLength } = RULES[rule.kind];
  const space = padded ? '[ \\t]*' : '';
  return {
    pattern: `^${space}(?:${name})?${space}$`,
    // With padding, the length is bounded by the label pattern itself (nameList is labels only).
    maxLength: padded ? Number.POSITIVE_INFINITY : maxLength,
    message: `can never match a ${rule.noun}: Kubernetes ${rule.noun}s are ${describeRule(rule.kind)}`,
  };
}

/** A name, a prefix ending in "*", "*" alone, or empty (where empty means "every"). */
export function namePattern(rule: NameRule, allowEmpty = true): NameFormat {
  const { name, prefix, maxLength } = RULES[rule.kind];
  return {
    pattern: `^(?:${name}|(?:${prefix})?\\*)${allowEmpty ? '?' : ''}$`,
    maxLength,
    message: `can never match a ${rule.noun}: write a ${rule.noun}, or a prefix ending in "*" such as "web-*" ("*" alone matches every one; "*" elsewhere and ? [ ] { } ! are not patterns here); Kubernetes ${rule.noun}s are ${describeRule(rule.kind)}`,
  };
}

/** A minimatch glob over names: the name characters plus glob metacharacters. */
export function nameGlob(rule: NameRule): NameFormat {
  const characters = rule.kind === 'label' ? '-a-z0-9' : '-a-z0-9.';
  return {
    // A blank entry is skipped by the log source, so it is allowed.
    pattern: `^(?:[ \\t]*|[${characters}*?[\\]{}!,^|()+@]+)$`,
    maxLength: RULES[rule.kind].maxLength,
    message: `can never match a ${rule.noun}: a pattern may hold glob characters (* ? [ ] { } ! , ^ | ( ) + @) and the characters of Kubernetes ${rule.noun}s, which are ${describeRule(rule.kind)}`,
  };
}
