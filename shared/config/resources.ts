// The resource spellings a rule may name, as the Go agent accepts them (reference section 2.6):
// a built-in alias, `version/resource` for the core group, or `group/version/resource` for any
// other group (CRDs included).

/** A resolved resource: an empty group is the core API group. */
export interface ResourceRef {
  readonly group: string;
  readonly version: string;
  readonly resource: string;
}

const CORE = (resource: string): ResourceRef => ({ group: '', version: 'v1', resource });
const IN = (group: string, version: string, resource: string): ResourceRef => ({
  group,
  version,
  resource,
});

/** Built-in aliases, lowercase. */
const ALIASES: ReadonlyMap<string, ResourceRef> = new Map([
  ['pods', CORE('pods')],
  ['pod', CORE('pods')],
  ['services', CORE('services')],
  ['service', CORE('services')],
  ['secrets', CORE('secrets')],
  ['secret', CORE('secrets')],
  ['configmaps', CORE('configmaps')],
  ['namespaces', CORE('namespaces')],
  ['nodes', CORE('nodes')],
  ['persistentvolumeclaims', CORE('persistentvolumeclaims')],
  ['pvc', CORE('persistentvolumeclaims')],
  ['pvcs', CORE('persistentvolumeclaims')],
  ['persistentvolumes', CORE('persistentvolumes')],
  ['pv', CORE('persistentvolumes')],
  ['serviceaccounts', CORE('serviceaccounts')],
  ['resourcequotas', CORE('resourcequotas')],
  ['limitranges', CORE('limitranges')],
  ['replicationcontrollers', CORE('replicationcontrollers')],
  ['endpoints', CORE('endpoints')],
  ['deployments', IN('apps', 'v1', 'deployments')],
  ['daemonsets', IN('apps', 'v1', 'daemonsets')],
  ['replicasets', IN('apps', 'v1', 'replicasets')],
  ['statefulsets', IN('apps', 'v1', 'statefulsets')],
  ['jobs', IN('batch', 'v1', 'jobs')],
  ['cronjobs', IN('batch', 'v1', 'cronjobs')],
  ['ingresses', IN('networking.k8s.io', 'v1', 'ingresses')],
  ['networkpolicies', IN('networking.k8s.io', 'v1', 'networkpolicies')],
  ['roles', IN('rbac.authorization.k8s.io', 'v1', 'roles')],
  ['rolebindings', IN('rbac.authorization.k8s.io', 'v1', 'rolebindings')],
  ['clusterroles', IN('rbac.authorization.k8s.io', 'v1', 'clusterroles')],
  ['clusterrolebindings', IN('rbac.authorization.k8s.io', 'v1', 'clusterrolebindings')],
  ['horizontalpodautoscalers', IN('autoscaling', 'v2', 'horizontalpodautoscalers')],
  ['hpa', IN('autoscaling', 'v2', 'horizontalpodautoscalers')],
  ['hpas', IN('autoscaling', 'v2', 'horizontalpodautoscalers')],
  ['poddisruptionbudgets', IN('policy', 'v1', 'poddisruptionbudgets')],
  ['pdb', IN('policy', 'v1', 'poddisruptionbudgets')],
  ['pdbs', IN('policy', 'v1', 'poddisruptionbudgets')],
  ['storageclasses', IN('storage.k8s.io', 'v1', 'storageclasses')],
  ['endpointslices', IN('discovery.k8s.io', 'v1', 'endpointslices')],
]);

/**
 * The resource a rule entry names, or undefined when the spelling is not one the agent accepts.
 * Wildcards are not resources: callers decide what a `*` means for their rule kind.
 */
export function parseResource(text: string): ResourceRef | undefined {
  const trimmed = text.trim().toLowerCase();
  if (trimmed === '' || trimmed.includes('*')) return undefined;
  const alias = ALIASES.get(trimmed);
  if (alias !== undefined) return alias;
  const parts = trimmed.split('/');
  if (parts.some((part) => part === '' || /\s/.test(part))) return undefined;
  if (parts.length === 2) return { group: '', version: parts[0] ?? '', resource: parts[1] ?? '' };
  if (parts.length === 3) {
    return { group: parts[0] ?? '', version: parts[1] ?? '', resource: parts[2] ?? '' };
  }
  return undefined;
}

/** `pods` -> `[Pp][Oo][Dd][Ss]`: case-insensitive without flags (JSON Schema patterns have none). */
function anyCase(word: string): string {
  return word.replace(/[a-z]/g, (letter) => `[${letter.toUpperCase()}${letter}]`);
}

/** One part of `version/resource` or `group/version/resource`. */
const PART = '[A-Za-z0-9.-]+';

/**
 * The spellings parseResource resolves, spaces and tabs around them allowed, as one anchored
 * pattern valid in JavaScript and RE2: the config check and the chart's values schema share it.
 */
export const RESOURCE_SPELLING = `[ \\t]*(?:${[...ALIASES.keys()].map(anyCase).join('|')}|${PART}/${PART}(?:/${PART})?)[ \\t]*`;

/** The metrics API serves pods and nodes only. */
export const METRICS_RESOURCE = `[ \\t]*(?:${['pods', 'pod', 'nodes', 'node'].map(anyCase).join('|')})[ \\t]*`;
