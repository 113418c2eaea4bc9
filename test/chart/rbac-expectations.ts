// What each rbac.* gate must grant, written out independently of the templates, so a template
// change that widens or narrows a grant fails the chart tests and the RBAC matrix alike.
// Grants are "group/resource:verb" ("" is the core group), as grants() in helm.ts produces.
import type { GateValues, Values } from './helm.js';

type Feature = 'exec' | 'nodeShell' | 'nodeOps' | 'write';

/**
 * The privileged features the executor implements, as the chart's kubexa.implementedFeatures
 * lists them. A gate for any other feature is refused, or (with RENDER_UNIMPLEMENTED) renders
 * the executor without the gate's RBAC. nodeOps and write: node jobs and mutations.
 */
export const IMPLEMENTED_FEATURES: readonly Feature[] = ['nodeOps', 'write'];

/** Values that let a gate whose feature is not implemented render (identity and socket tests). */
export const RENDER_UNIMPLEMENTED: Values = { executor: { renderUnimplemented: true } };

/** The gates that really grant RBAC: on, and implemented. */
export function grantingGates(gates: GateValues): GateValues {
  const on = (feature: Feature) =>
    gates[feature] === true && IMPLEMENTED_FEATURES.includes(feature);
  return {
    exec: on('exec'),
    nodeShell: on('nodeShell'),
    nodeOps: on('nodeOps'),
    write: on('write'),
    ...(gates.readAll === undefined ? {} : { readAll: gates.readAll }),
  };
}

/** The executor's only grant of its own: the collector's token, by TokenRequest. */
export const TOKEN_MINTER_GRANT = '/serviceaccounts/token:create';

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
];

export function expectedExecutorClusterGrants(asked: GateValues): Set<string> {
  const gates = grantingGates(asked);
  return new Set([
    ...(gates.exec ? EXECUTOR_CLUSTER_GRANTS.exec : []),
    ...(gates.nodeOps ? EXECUTOR_CLUSTER_GRANTS.nodeOps : []),
    ...(gates.write ? EXECUTOR_CLUSTER_GRANTS.write : []),
  ]);
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
