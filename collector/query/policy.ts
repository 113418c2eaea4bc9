// The live-query policy: compiled once from the loaded config's query section (which already
// carries collect.state's inheritance, see shared/config/normalize.ts) and immutable after. It
// answers "did the cluster owner agree the platform may read this" for every request before any
// API call; RBAC is the separate, second gate the API server applies.
import type { Config } from '../../shared/config/schema.js';
import { parseResource } from '../../shared/config/resources.js';

export type QueryVerbName = 'list' | 'get';

/** group "" is the core group. */
export interface GroupVersionResource {
  readonly group: string;
  readonly version: string;
  readonly resource: string;
}

/** A name or namespace pattern: an exact name, a prefix ending in "*", or "*" alone. */
export interface NamePattern {
  readonly text: string;
  matches(name: string): boolean;
}

export interface AllowedDecision {
  readonly allowed: true;
  readonly ruleId: string;
  /** The rule named "*" rather than this resource (metrics then say "other" on failures). */
  readonly wildcard: boolean;
  readonly redactSecrets: boolean;
  readonly labelSelector: string;
  readonly fieldSelector: string;
  /** The rule's names patterns; empty allows every name. LIST rows are filtered by them. */
  readonly names: readonly NamePattern[];
}

export interface DeniedDecision {
  readonly allowed: false;
  readonly reason: string;
}

export type QueryDecision = AllowedDecision | DeniedDecision;

export interface QueryPolicy {
  readonly enabled: boolean;
  readonly redactSecrets: boolean;
  decide(
    ref: GroupVersionResource,
    verb: QueryVerbName,
    namespace: string,
    name: string,
  ): QueryDecision;
  /** Coarse, per resource, for the catalog: some rule permits this verb somewhere. */
  allowsAny(ref: GroupVersionResource, verb: QueryVerbName): boolean;
}

interface CompiledRule {
  readonly id: string;
  readonly wildcard: boolean;
  readonly resources: ReadonlySet<string>;
  /** undefined: every namespace, cluster scope and "all namespaces" included. */
  readonly namespace: NamePattern | undefined;
  readonly names: readonly NamePattern[];
  readonly verbs: ReadonlySet<QueryVerbName>;
  readonly labelSelector: string;
  readonly fieldSelector: string;
}

export const DISABLED_REASON =
  "live resource query is disabled in this agent's configuration (query.enabled: false)";

const DNS_LABEL = /^[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?$/;
const DNS_SUBDOMAIN_PART = /^[a-z0-9](?:[-a-z0-9]*[a-z0-9])?$/;

/** "g/v/r", or "v/r" for the core group: how refusals and metrics name a resource. */
export function refKey(ref: GroupVersionResource): string {
  return ref.group === ''
    ? `${ref.version}/${ref.resource}`
    : `${ref.group}/${ref.version}/${ref.resource}`;
}

function isSubdomain(text: string): boolean {
  return text.length <= 253 && text.split('.').every((part) => DNS_SUBDOMAIN_PART.test(part));
}

/**
 * Why a requested reference is not a resource the API server could serve, or undefined when it
 * is well formed. Strict on purpose: the parts become URL path segments, so "./secrets",
 * "x/../secrets" or "SECRETS" must be refused here, never normalized by a URL parser into a
 * path the policy did not decide on.
 */
export function invalidRefReason(ref: GroupVersionResource): string | undefined {
  const shown = JSON.stringify(
    [ref.group, ref.version, ref.resource].filter((p, i) => i > 0 || p !== '').join('/'),
  );
  if (!DNS_LABEL.test(ref.resource)) {
    return `invalid resource reference ${shown}: the resource must be a lowercase plural name (a DNS-1123 label such as "pods")`;
  }
  if (!DNS_LABEL.test(ref.version)) {
    return `invalid resource reference ${shown}: the version must be a DNS-1123 label such as "v1"`;
  }
  if (ref.group !== '' && !isSubdomain(ref.group)) {
    return `invalid resource reference ${shown}: the group must be empty (core) or a DNS-1123 subdomain such as "apps"`;
  }
  return undefined;
}

/**
 * Why a namespace or name cannot be one the API server has, or undefined. Both become path
 * segments: "..", "/" or "%" must never reach a URL.
 */
export function invalidTargetReason(namespace: string, name: string): string | undefined {
  if (namespace !== '' && !DNS_LABEL.test(namespace)) {
    return `invalid namespace ${JSON.stringify(namespace)}: namespaces are DNS-1123 labels`;
  }
  if (name === '.' || name === '..' || /[/%]/.test(name) || name.length > 253) {
    return `invalid name ${JSON.stringify(name)}: an object name has no "/" or "%", is not "." or "..", and has at most 253 characters`;
  }
  return undefined;
}

export function compileNamePattern(text: string): NamePattern {
  const trimmed = text.trim();
  if (trimmed.endsWith('*')) {
    const prefix = trimmed.slice(0, -1);
    if (prefix.includes('*')) throw new Error(`${JSON.stringify(text)}: "*" only at the end`);
    return { text: trimmed, matches: (name) => name.startsWith(prefix) };
  }
  if (trimmed.includes('*')) throw new Error(`${JSON.stringify(text)}: "*" only at the end`);
  return { text: trimmed, matches: (name) => name === trimmed };
}

/** True when `name` passes the patterns (no patterns: every name). */
export function namesAllow(patterns: readonly NamePattern[], name: string): boolean {
  return patterns.length === 0 || patterns.some((pattern) => pattern.matches(name));
}

type QuerySection = Config['query'];

function compileRule(rule: QuerySection['rules'][number]): CompiledRule {
  let wildcard = false;
  const resources = new Set<string>();
  for (const entry of rule.resources) {
    if (entry.trim() === '*') {
      wildcard = true;
      continue;
    }
    const ref = parseResource(entry);
    // The loader refused these already; a second check keeps a hand-built config honest.
    if (ref === undefined) throw new Error(`query rule ${rule.id}: unsupported resource ${entry}`);
    resources.add(refKey(ref));
  }
  const verbs = new Set<QueryVerbName>();
  for (const verb of rule.verbs) {
    const lower = verb.trim().toLowerCase();
    if (lower !== 'list' && lower !== 'get') {
      throw new Error(`query rule ${rule.id}: unsupported verb ${JSON.stringify(verb)}`);
    }
    verbs.add(lower);
  }
  if (verbs.size === 0) {
    verbs.add('list');
    verbs.add('get');
  }
  const namespace = rule.namespace.trim();
  return {
    id: rule.id,
    wildcard,
    resources,
    namespace: namespace === '' ? undefined : compileNamePattern(namespace),
    names: rule.names.filter((name) => name.trim() !== '').map((name) => compileNamePattern(name)),
    verbs,
    labelSelector: rule.label_selector.trim(),
    fieldSelector: rule.field_selector.trim(),
  };
}

function coversResource(rule: CompiledRule, key: string): boolean {
  return rule.wildcard || rule.resources.has(key);
}

/**
 * A rule without a namespace matches every request, cluster-scoped and all-namespaces ones
 * included; a rule with one needs a request in a namespace it matches. Names bind GET only
 * (LIST rows are filtered by them instead).
 */
function ruleMatches(
  rule: CompiledRule,
  request: { key: string; verb: QueryVerbName; namespace: string; name: string },
): boolean {
  if (!coversResource(rule, request.key) || !rule.verbs.has(request.verb)) return false;
  if (rule.namespace !== undefined) {
    if (request.namespace === '' || !rule.namespace.matches(request.namespace)) return false;
  }
  return request.verb !== 'get' || namesAllow(rule.names, request.name);
}

/** Compiles the query section once; throws on a rule the loader should have refused. */
export function compileQueryPolicy(query: QuerySection): QueryPolicy {
  const rules = query.rules.map(compileRule);
  const redactSecrets = query.redact_secrets;
  return {
    enabled: query.enabled,
    redactSecrets,
    decide(ref, verb, namespace, name) {
      if (!query.enabled) return { allowed: false, reason: DISABLED_REASON };
      const invalid = invalidRefReason(ref);
      if (invalid !== undefined) return { allowed: false, reason: invalid };
      const badTarget = invalidTargetReason(namespace, name);
      if (badTarget !== undefined) return { allowed: false, reason: badTarget };
      const key = refKey(ref);
      const rule = rules.find((candidate) =>
        ruleMatches(candidate, { key, verb, namespace, name }),
      );
      if (rule !== undefined) {
        return {
          allowed: true,
          ruleId: rule.id,
          wildcard: rule.wildcard,
          redactSecrets,
          labelSelector: rule.labelSelector,
          fieldSelector: rule.fieldSelector,
          names: rule.names,
        };
      }
      const where = namespace === '' ? 'across all namespaces' : `in namespace "${namespace}"`;
      const what = verb === 'get' ? `${key} "${name}"` : key;
      return {
        allowed: false,
        reason: `the cluster owner's agent configuration does not permit ${verb} on ${what} ${where} (no query rule matches)`,
      };
    },
    allowsAny(ref, verb) {
      if (!query.enabled || invalidRefReason(ref) !== undefined) return false;
      const key = refKey(ref);
      return rules.some((rule) => coversResource(rule, key) && rule.verbs.has(verb));
    },
  };
}

/** The policy's selector AND the request's: "p,r", or whichever is set. */
export function andSelectors(policy: string, request: string): string {
  const p = policy.trim();
  const r = request.trim();
  if (p === '') return r;
  if (r === '') return p;
  return `${p},${r}`;
}
