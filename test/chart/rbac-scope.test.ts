// The executor's RBAC follows the agent's own policy where Kubernetes can express it, on helm
// 3.17 and helm 4.1: a gate whose rules each name an exact namespace gets a Role per namespace,
// a pattern or a missing namespace keeps the ClusterRole, node-console helpers get their Role in
// exec.node.namespace. Rendered with every feature implemented (chartWithFeatures), as the chart
// will be once the executor implements them; expectations from rbac-expectations.ts.
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { buildClusterBinaries } from '../cluster/cluster.js';
import {
  deepMerge,
  HELM_VERSIONS,
  render,
  rulesOf,
  type ChartFeature,
  type GateValues,
  type KubeObject,
  type Values,
} from './helm.js';
import {
  expectedExecutorRbac,
  renderedRbacOf,
  sortedRbac,
  type ExecutorPolicy,
  type ExpectedExecutorRbac,
} from './rbac-expectations.js';

const ALL_FEATURES: readonly ChartFeature[] = ['exec', 'nodeShell', 'nodeOps', 'write'];
const RELEASE_NAMESPACE = 'kubexa';
const EXECUTOR_SA = 'kubexa-agent-executor';
const PINNED_IMAGE = `registry.example.com/tools/nsenter@sha256:${'b'.repeat(64)}`;

/** The executor's grants as rendered; every executor role bound, every binding resolved. */
function renderedExecutorRbac(objects: readonly KubeObject[]): ExpectedExecutorRbac {
  const rbac = renderedRbacOf(objects, { name: EXECUTOR_SA, namespace: RELEASE_NAMESPACE });
  expect({ unbound: rbac.unbound, dangling: rbac.dangling }).toEqual({ unbound: [], dangling: [] });
  return rbac;
}

interface ScopeCase {
  readonly name: string;
  readonly rbac: GateValues;
  readonly policy: ExecutorPolicy;
  /** Namespaces that must hold an executor Role (a readable summary of the expectation). */
  readonly roleNamespaces: readonly string[];
  /** Whether the executor's ClusterRole exists. */
  readonly clusterRole: boolean;
}

const ALL_GATES: GateValues = { exec: true, nodeShell: true, nodeOps: true, write: true };

const CASES: readonly ScopeCase[] = [
  {
    name: 'every rule names an exact namespace: Roles there, the ClusterRole holds node jobs only',
    rbac: ALL_GATES,
    policy: {
      execRules: [{ namespace: 'team-b' }, { namespace: 'team-a' }, { namespace: 'team-a' }],
      mutateRules: [{ namespace: 'team-c' }],
    },
    roleNamespaces: ['kubexa', 'team-a', 'team-b', 'team-c'],
    clusterRole: true,
  },
  {
    name: 'exec and write scoped, no node jobs: no ClusterRole at all',
    rbac: { exec: true, write: true },
    policy: { execRules: [{ namespace: 'team-a' }], mutateRules: [{ namespace: 'team-a' }] },
    roleNamespaces: ['kubexa', 'team-a'],
    clusterRole: false,
  },
  {
    name: 'a pattern in exec.pod.rules keeps pod consoles cluster-wide',
    rbac: { exec: true, write: true },
    policy: {
      execRules: [{ namespace: 'team-a' }, { namespace: 'team-*' }],
      mutateRules: [{ namespace: 'team-a' }],
    },
    roleNamespaces: ['kubexa', 'team-a'],
    clusterRole: true,
  },
  {
    name: '"*" in mutate.rules keeps writes cluster-wide',
    rbac: { exec: true, write: true },
    policy: { execRules: [{ namespace: 'team-a' }], mutateRules: [{ namespace: '*' }] },
    roleNamespaces: ['kubexa', 'team-a'],
    clusterRole: true,
  },
  {
    name: 'a rule without a namespace keeps pod consoles cluster-wide',
    rbac: { exec: true },
    policy: { execRules: [{ namespace: 'team-a' }, {}] },
    roleNamespaces: ['kubexa'],
    clusterRole: true,
  },
  {
    name: 'a prefix pattern in mutate.rules keeps writes cluster-wide',
    rbac: { exec: true, write: true },
    policy: {
      execRules: [{ namespace: 'team-a' }],
      mutateRules: [{ namespace: 'team-a' }, { namespace: 'team-*' }],
    },
    roleNamespaces: ['kubexa', 'team-a'],
    clusterRole: true,
  },
  {
    name: 'no rules: the policy allows nothing and nothing is granted',
    rbac: { exec: true, write: true },
    policy: {},
    roleNamespaces: ['kubexa'],
    clusterRole: false,
  },
  {
    name: 'node consoles with exec.node.namespace: the helper Role there, only a sweep at home',
    rbac: { nodeShell: true },
    policy: { nodeNamespace: 'kubexa-node-shells' },
    roleNamespaces: ['kubexa', 'kubexa-node-shells'],
    clusterRole: false,
  },
  {
    name: 'node consoles without exec.node.namespace: the helper Role in the release namespace',
    rbac: { nodeShell: true },
    policy: {},
    roleNamespaces: ['kubexa'],
    clusterRole: false,
  },
];

function valuesFor(c: ScopeCase): Values {
  return {
    rbac: c.rbac,
    exec: {
      pod: { rules: c.policy.execRules ?? [] },
      node:
        c.policy.nodeNamespace === undefined
          ? {}
          : { namespace: c.policy.nodeNamespace, image: PINNED_IMAGE },
    },
    mutate: {
      rules: (c.policy.mutateRules ?? []).map((rule) => ({
        ...rule,
        resources: ['deployments'],
        verbs: ['scale'],
      })),
    },
  };
}

describe.each(HELM_VERSIONS)('executor RBAC scoped to the policy ($label)', ({ binary }) => {
  let helm = '';
  beforeAll(async () => {
    helm = join(await buildClusterBinaries(process.env), binary);
  });

  const renderScoped = (values: Values) =>
    render(helm, { values, namespace: RELEASE_NAMESPACE, implementedFeatures: ALL_FEATURES });

  it.each(CASES)('$name', async (c) => {
    const objects = await renderScoped(valuesFor(c));
    const actual = renderedExecutorRbac(objects);
    const expected = expectedExecutorRbac(c.rbac, c.policy, RELEASE_NAMESPACE, ALL_FEATURES);
    expect(sortedRbac(actual)).toEqual(sortedRbac(expected));
    expect([...actual.namespaced.keys()].sort()).toEqual(c.roleNamespaces);
    expect(
      objects.some((o) => o.kind === 'ClusterRole' && o.metadata.name.endsWith('-executor')),
    ).toBe(c.clusterRole);
    // Whatever the scope: no wildcard, and no Pod is created outside the helpers' namespace.
    for (const role of objects.filter((o) => o.kind.endsWith('Role'))) {
      for (const rule of rulesOf(role)) {
        const words = [...(rule.apiGroups ?? []), ...(rule.resources ?? []), ...rule.verbs];
        expect(words.filter((w) => w.includes('*'))).toEqual([]);
      }
    }
  });

  it('the release namespace needs no privileged Pod Security level once helpers live elsewhere', async () => {
    const objects = await renderScoped(
      valuesFor({
        name: '',
        rbac: { exec: true, nodeShell: true, nodeOps: true },
        policy: { execRules: [{ namespace: 'team-a' }], nodeNamespace: 'kubexa-node-shells' },
        roleNamespaces: [],
        clusterRole: true,
      }),
    );
    const rbac = renderedExecutorRbac(objects);
    const home = rbac.namespaced.get(RELEASE_NAMESPACE) ?? new Set();
    expect([...home].filter((grant) => grant.startsWith('/pods:create'))).toEqual([]);
    expect([...home].filter((grant) => grant.startsWith('/pods/exec'))).toEqual([]);
    expect(rbac.namespaced.get('kubexa-node-shells')).toContain('/pods:create');
  });

  it('rbac.create=false renders no Role or binding in any namespace', async () => {
    const objects = await renderScoped(
      deepMerge(valuesFor(CASES[0]!), { rbac: { create: false } }),
    );
    expect(objects.filter((o) => /^(Cluster)?Role(Binding)?$/.test(o.kind))).toEqual([]);
  });

  it('names each namespaced grant after its gate, bound to the executor of this release only', async () => {
    const objects = await renderScoped(valuesFor(CASES[0]!));
    const names = objects
      .filter((o) => o.kind === 'Role')
      .map((o) => `${o.metadata.namespace ?? ''}/${o.metadata.name}`)
      .sort();
    expect(names).toEqual([
      'kubexa/kubexa-agent-executor-node-shell',
      'kubexa/kubexa-agent-executor-token-minter',
      'team-a/kubexa-agent-executor-exec',
      'team-b/kubexa-agent-executor-exec',
      'team-c/kubexa-agent-executor-write',
    ]);
    for (const binding of objects.filter((o) => o.kind === 'RoleBinding')) {
      expect(binding['subjects']).toEqual([
        { kind: 'ServiceAccount', name: EXECUTOR_SA, namespace: RELEASE_NAMESPACE },
      ]);
    }
  });
});
