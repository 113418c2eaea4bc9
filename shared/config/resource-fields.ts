// Resource lists of the rule kinds, as field rules: each entry is checked by one anchored pattern
// that values.schema.json copies, and each rule kind words its own refusal.
import * as z from 'zod';
import { notAResourceMessage } from './rule-checks.js';
import { METRICS_RESOURCE, RESOURCE_SPELLING } from './resources.js';

export type ResourceListKind = 'watch' | 'query' | 'mutate' | 'metrics';

const PATTERNS: Readonly<Record<ResourceListKind, string>> = {
  watch: `^${RESOURCE_SPELLING}$`,
  query: `^(?:[ \\t]*\\*[ \\t]*|${RESOURCE_SPELLING})$`,
  mutate: `^${RESOURCE_SPELLING}$`,
  metrics: `^${METRICS_RESOURCE}$`,
};

const EMPTY: Readonly<Record<ResourceListKind, string>> = {
  watch: 'list at least one resource, e.g. [pods]',
  query: 'list at least one resource, e.g. [pods] ("*" for every resource)',
  mutate: 'list at least one resource, e.g. [deployments]',
  metrics: 'list at least one of pods, nodes',
};

function refusal(kind: ResourceListKind, entry: string): string {
  if (kind === 'metrics') return `"${entry}" is not supported; use pods or nodes`;
  if (entry.includes('*')) {
    switch (kind) {
      case 'watch':
        return `"${entry}" is a wildcard, which only query.rules may use (a watch needs concrete resources); name them, e.g. [pods, deployments]`;
      case 'query':
        return `"${entry}" is a partial wildcard; only the bare "*" is a wildcard in query.rules`;
      case 'mutate':
        return `"${entry}" is a wildcard, and mutate.rules refuse every wildcard form ("*", "apps/v1/*", "*/scale", "deploy*"); name each resource, e.g. deployments`;
    }
  }
  return notAResourceMessage(entry);
}

/** A rule's resources: at least one, each spelled as this kind of rule accepts. */
export function resourceList(kind: ResourceListKind) {
  const entry = z.string().regex(new RegExp(PATTERNS[kind]), {
    error: (issue) => refusal(kind, String(issue.input)),
  });
  return z.array(entry).min(1, EMPTY[kind]).prefault([]);
}
