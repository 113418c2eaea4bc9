// What each rbac.* gate must grant, written out independently of the templates, so a template
// change that widens or narrows a grant fails the chart tests and the RBAC matrix alike.
// Grants are "group/resource:verb" ("" is the core group), as grants() in helm.ts produces.
import {
  grants,
  rulesOf,
  type ChartFeature,
  type GateValues,
  type KubeObject,
  type Values,
} from './helm.js';

type Feature = ChartFeature;

/**
 * The privileged features the executor implements, as the chart's kubexa.implementedFeatures
 * lists them. A gate for any other feature is refused, or (with RENDER_UNIMPLEMENTED) renders
 * the executor without the gate's RBAC. exec: pod consoles; nodeShell: node consoles; nodeOps and
 * write: node jobs and mutations.
 */
export const IMPLEMENTED_FEATURES: readonly Feature[] = ['exec', 'nodeShell', 'nodeOps', 'write'];

/** Values that let a gate whose feature is not implemented render (identity and socket tests). */
export const RENDER_UNIMPLEMENTED: Values = { executor: { renderUnimplemented: true } };

/** The gates that really grant RBAC: on, and implemented. */
export function grantingGates(
  gates: GateValues,
  implemented: readonly Feature[] = IMPLEMENTED_FEATURES,
): GateValues {
  const on = (feature: Feature) => gates[feature] === true && implemented.includes(feature);
  return {
    exec: on('exec'),
    nodeShell: on('nodeShell'),
    nodeOps: on('nodeOps'),
    write: on('write'),
    ...(gates.readAll === undefined ? {} : { readAll: gates.readAll }),
  };
}

/** The executor's grant of its own: the collector's token, by TokenRequest. */
export const TOKEN_MINTER_GRANT = '/serviceaccounts/token:create';
/**
 * ... bound to a Secret its Pod owns, which it creates at start. RBAC cannot limit `create` by
 * name; the chart's ValidatingAdmissionPolicy admits only that one Secret
 * (test/security/identities.test.ts).
 */
export const BINDING_SECRET_GRANT = '/secrets:create';

function expand(group: string, resources: readonly string[], verbs: readonly string[]): string[] {
  return resources.flatMap((resource) => verbs.map((verb) => `${group}/${resource}:${verb}`));
}

/** The enumerated resource lists shared by the collector's state rule and rbac.write. */
export const ENUMERATED_RESOURCES: readonly { group: string; resources: readonly string[] }[] = [
  {
    group: '',
    resources: [
      'pods',
      'services',
      'secrets',
      'configmaps',
      'endpoints',
      'persistentvolumeclaims',
      'persistentvolumes',
      'serviceaccounts',
      'nodes',
      'resourcequotas',
      'limitranges',
      'replicationcontrollers',
    ],
  },
  { group: 'apps', resources: ['deployments', 'daemonsets', 'replicasets', 'statefulsets'] },
  { group: 'batch', resources: ['jobs', 'cronjobs'] },
  { group: 'networking.k8s.io', resources: ['ingresses', 'networkpolicies'] },
  {
    group: 'rbac.authorization.k8s.io',
    resources: ['roles', 'rolebindings', 'clusterroles', 'clusterrolebindings'],
  },
  { group: 'autoscaling', resources: ['horizontalpodautoscalers'] },
  { group: 'policy', resources: ['poddisruptionbudgets'] },
  { group: 'storage.k8s.io', resources: ['storageclasses'] },
  { group: 'discovery.k8s.io', resources: ['endpointslices'] },
];

export const SCALE_SUBRESOURCES: readonly { group: string; resources: readonly string[] }[] = [
  { group: '', resources: ['replicationcontrollers/scale'] },
  { group: 'apps', resources: ['deployments/scale', 'replicasets/scale', 'statefulsets/scale'] },
];

export const WRITE_VERBS = ['create', 'update', 'patch', 'delete'] as const;

/** Cluster-wide grants of the executor's ClusterRole, per gate. */
export const EXECUTOR_CLUSTER_GRANTS = {
  exec: [...expand('', ['pods'], ['get']), ...expand('', ['pods/exec'], ['get', 'create'])],
  nodeOps: [
    ...expand('', ['nodes'], ['get', 'patch']),
    ...expand('', ['pods'], ['list']),
    ...expand('', ['pods/eviction'], ['create']),
    ...expand('apps', ['daemonsets'], ['get']),
  ],
  write: [
    ...ENUMERATED_RESOURCES.flatMap(({ group, resources }) =>
      expand(group, resources, WRITE_VERBS),
    ),
    ...SCALE_SUBRESOURCES.flatMap(({ group, resources }) =>
      expand(group, resources, ['get', 'update', 'patch']),
    ),
  ],
} as const;

/** Grants of the executor's Role in the release namespace (rbac.nodeShell). */
export const NODE_SHELL_ROLE_GRANTS = [
  ...expand('', ['pods'], ['create', 'get', 'list', 'watch', 'delete']),
  ...expand('', ['pods/exec'], ['get', 'create']),
  // The pod's events explain a helper that does not start.
  ...expand('', ['events'], ['list']),
];

/**
 * The executor's cluster-wide grants for these gates when the values name no rules: exec and
 * write are scoped to their rules (none here: nothing), nodeOps is cluster-wide.
 */
export function expectedExecutorClusterGrants(
  asked: GateValues,
  implemented: readonly Feature[] = IMPLEMENTED_FEATURES,
): Set<string> {
  return expectedExecutorRbac(asked, {}, 'unused', implemented).cluster;
}

export function executorEnabled(gates: GateValues): boolean {
  return [gates.exec, gates.nodeShell, gates.nodeOps, gates.write].some((gate) => gate === true);
}

/** Verbs that change something. The collector's identity holds none of them (SSAR create aside). */
export const MUTATING_VERBS = [
  'create',
  'update',
  'patch',
  'delete',
  'deletecollection',
  'escalate',
  'bind',
  'impersonate',
  'approve',
  'sign',
  '*',
] as const;

/** Subresources that open a shell, a proxy or an eviction: never the collector's. */
export const DANGEROUS_SUBRESOURCES = [
  'pods/exec',
  'pods/attach',
  'pods/portforward',
  'pods/eviction',
  'pods/proxy',
  'nodes/proxy',
  'services/proxy',
  'serviceaccounts/token',
] as const;

/** Resources of rbac.write that are cluster-scoped: a Role in one namespace never holds them. */
export const CLUSTER_SCOPED_WRITE_RESOURCES = [
  '/nodes',
  '/persistentvolumes',
  'rbac.authorization.k8s.io/clusterroles',
  'rbac.authorization.k8s.io/clusterrolebindings',
  'storage.k8s.io/storageclasses',
] as const;

/** rbac.write's grants in a Role of one namespace: the namespaced resources only. */
export const NAMESPACED_WRITE_GRANTS = EXECUTOR_CLUSTER_GRANTS.write.filter(
  (grant) => !CLUSTER_SCOPED_WRITE_RESOURCES.some((resource) => grant.startsWith(`${resource}:`)),
);

/** The boot sweep's grant in the release namespace when helpers live elsewhere. */
export const NODE_SHELL_SWEEP_GRANTS = expand('', ['pods'], ['list', 'delete']);

/** The parts of the agent's policy (values, in their snake_case list form) RBAC follows. */
export interface ExecutorPolicy {
  readonly execRules?: readonly { readonly namespace?: string }[];
  readonly mutateRules?: readonly { readonly namespace?: string }[];
  readonly nodeNamespace?: string;
}

/**
 * The namespaces a rule list is confined to, or "cluster" when a rule names a pattern or no
 * namespace. Written independently of the template: a namespace is exact when it is a DNS label.
 */
export function ruleScope(
  rules: readonly { readonly namespace?: string }[] = [],
): 'cluster' | string[] {
  const exact = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
  const names = rules.map((rule) => rule.namespace ?? '');
  if (names.some((name) => !exact.test(name))) return 'cluster';
  return [...new Set(names)].sort();
}

/** Everything the executor's RBAC grants: cluster-wide, and per namespace (Roles). */
export interface ExpectedExecutorRbac {
  readonly cluster: Set<string>;
  readonly namespaced: Map<string, Set<string>>;
}

/** What the chart must grant the executor for these gates, this policy and these features. */
export function expectedExecutorRbac(
  asked: GateValues,
  policy: ExecutorPolicy,
  releaseNamespace: string,
  implemented: readonly Feature[] = IMPLEMENTED_FEATURES,
): ExpectedExecutorRbac {
  const gates = grantingGates(asked, implemented);
  const cluster = new Set<string>();
  const namespaced = new Map<string, Set<string>>();
  const grantIn = (namespace: string, grants: readonly string[]) => {
    const set = namespaced.get(namespace) ?? new Set<string>();
    for (const grant of grants) set.add(grant);
    namespaced.set(namespace, set);
  };
  if (executorEnabled(asked)) {
    grantIn(releaseNamespace, [TOKEN_MINTER_GRANT, BINDING_SECRET_GRANT]);
  }
  if (gates.nodeOps === true) for (const g of EXECUTOR_CLUSTER_GRANTS.nodeOps) cluster.add(g);
  if (gates.exec === true) {
    const scope = ruleScope(policy.execRules);
    if (scope === 'cluster') for (const g of EXECUTOR_CLUSTER_GRANTS.exec) cluster.add(g);
    else for (const ns of scope) grantIn(ns, EXECUTOR_CLUSTER_GRANTS.exec);
  }
  if (gates.write === true) {
    const scope = ruleScope(policy.mutateRules);
    if (scope === 'cluster') for (const g of EXECUTOR_CLUSTER_GRANTS.write) cluster.add(g);
    else for (const ns of scope) grantIn(ns, NAMESPACED_WRITE_GRANTS);
  }
  if (gates.nodeShell === true) {
    const asked = policy.nodeNamespace?.trim() ?? '';
    const home = asked === '' ? releaseNamespace : asked;
    grantIn(home, NODE_SHELL_ROLE_GRANTS);
    if (home !== releaseNamespace) grantIn(releaseNamespace, NODE_SHELL_SWEEP_GRANTS);
  }
  return { cluster, namespaced };
}

interface Binding {
  readonly roleRef: { readonly kind: string; readonly name: string };
  readonly subjects?: readonly {
    readonly kind: string;
    readonly name: string;
    readonly namespace?: string;
  }[];
}

/** What rendered objects grant a ServiceAccount, and the objects that do not add up. */
export interface RenderedRbac extends ExpectedExecutorRbac {
  /** Executor roles no binding of the ServiceAccount uses. */
  readonly unbound: string[];
  /** Bindings of the ServiceAccount to a role that was not rendered. */
  readonly dangling: string[];
}

/**
 * The grants rendered objects give a ServiceAccount, read as the API server reads them: a
 * ClusterRole counts cluster-wide only through a ClusterRoleBinding, a Role only through a
 * RoleBinding in its own namespace.
 */
export function renderedRbacOf(
  objects: readonly KubeObject[],
  serviceAccount: { readonly name: string; readonly namespace: string },
): RenderedRbac {
  const cluster = new Set<string>();
  const namespaced = new Map<string, Set<string>>();
  const dangling: string[] = [];
  const roles = objects.filter((o) => o.kind === 'Role' || o.kind === 'ClusterRole');
  const used = new Set<KubeObject>();
  for (const binding of objects.filter((o) => o.kind.endsWith('RoleBinding'))) {
    const { roleRef, subjects = [] } = binding as unknown as Binding;
    const bound = subjects.some(
      (s) =>
        s.kind === 'ServiceAccount' &&
        s.name === serviceAccount.name &&
        s.namespace === serviceAccount.namespace,
    );
    if (!bound) continue;
    const role = roles.find(
      (r) =>
        r.kind === roleRef.kind &&
        r.metadata.name === roleRef.name &&
        (r.kind === 'ClusterRole' || r.metadata.namespace === binding.metadata.namespace),
    );
    if (role === undefined) {
      dangling.push(`${binding.kind}/${binding.metadata.name}`);
      continue;
    }
    used.add(role);
    const namespace = binding.metadata.namespace ?? '';
    const target =
      binding.kind === 'ClusterRoleBinding'
        ? cluster
        : (namespaced.get(namespace) ?? new Set<string>());
    for (const grant of grants(rulesOf(role))) target.add(grant);
    if (binding.kind === 'RoleBinding') namespaced.set(namespace, target);
  }
  const unbound = roles
    .filter((r) => r.metadata.labels?.['app.kubernetes.io/component'] === 'executor')
    .filter((r) => !used.has(r))
    .map((r) => `${r.kind}/${r.metadata.namespace ?? ''}/${r.metadata.name}`);
  return { cluster, namespaced, unbound, dangling };
}

/** A comparable form of an RBAC summary (sorted arrays; empty namespaces dropped). */
export function sortedRbac(rbac: ExpectedExecutorRbac): {
  cluster: string[];
  namespaced: Record<string, string[]>;
} {
  return {
    cluster: [...rbac.cluster].sort(),
    namespaced: Object.fromEntries(
      [...rbac.namespaced.entries()]
        .filter(([, set]) => set.size > 0)
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([ns, set]) => [ns, [...set].sort()]),
    ),
  };
}
