// Invariants of the rendered chart over EVERY combination of the four privileged gates, on both
// helm versions: as shipped (every feature implemented), and with every feature listed
// (chartWithFeatures) under a policy of exact namespaces and one of patterns. The adversarial
// values are in test/chart/refusals.test.ts (run by `npm run test:security` too).
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { buildClusterBinaries } from '../cluster/cluster.js';
import {
  findOne,
  grants,
  HELM_VERSIONS,
  render,
  rulesOf,
  type ChartFeature,
  type KubeObject,
  type Values,
} from '../chart/helm.js';
import {
  DANGEROUS_SUBRESOURCES,
  expectedExecutorRbac,
  IMPLEMENTED_FEATURES,
  MUTATING_VERBS,
  RENDER_UNIMPLEMENTED,
  renderedRbacOf,
  sortedRbac,
  type ExecutorPolicy,
} from '../chart/rbac-expectations.js';

const GATES = ['exec', 'nodeShell', 'nodeOps', 'write'] as const;
const ALL_FEATURES: readonly ChartFeature[] = ['exec', 'nodeShell', 'nodeOps', 'write'];
const PINNED_IMAGE = `registry.example.com/tools/nsenter@sha256:${'c'.repeat(64)}`;

/** The chart as shipped, and as it will be once every feature exists, under two policies. */
const WORLDS: readonly {
  readonly world: string;
  readonly features: readonly ChartFeature[];
  readonly policy: ExecutorPolicy;
}[] = [
  { world: 'as shipped', features: IMPLEMENTED_FEATURES, policy: {} },
  {
    world: 'all features, exact namespaces',
    features: ALL_FEATURES,
    policy: {
      execRules: [{ namespace: 'team-a' }, { namespace: 'team-b' }],
      mutateRules: [{ namespace: 'team-a' }],
      nodeNamespace: 'kubexa-node-shells',
    },
  },
  {
    world: 'all features, patterns',
    features: ALL_FEATURES,
    policy: { execRules: [{ namespace: 'team-*' }], mutateRules: [{ namespace: '*' }] },
  },
];

const COMBINATIONS = WORLDS.flatMap(({ world, features, policy }) =>
  Array.from({ length: 1 << GATES.length }, (_, bits) => {
    const rbac = Object.fromEntries(GATES.map((gate, i) => [gate, (bits & (1 << i)) !== 0]));
    const name = GATES.filter((_gate, i) => (bits & (1 << i)) !== 0).join('+') || 'none';
    return { name: `${world}: ${name}`, rbac, gated: bits !== 0, features, policy };
  }),
);

function policyValues(policy: ExecutorPolicy): Values {
  return {
    exec: {
      pod: { rules: policy.execRules ?? [] },
      node:
        policy.nodeNamespace === undefined
          ? {}
          : { namespace: policy.nodeNamespace, image: PINNED_IMAGE },
    },
    mutate: {
      rules: (policy.mutateRules ?? []).map((rule) => ({
        ...rule,
        resources: ['deployments'],
        verbs: ['scale'],
      })),
    },
  };
}

interface Container {
  name: string;
  securityContext?: { runAsUser?: number };
  volumeMounts?: { name: string; mountPath: string; readOnly?: boolean }[];
  env?: { name: string }[];
}
interface Volume {
  name: string;
  projected?: { sources: Record<string, unknown>[] };
  emptyDir?: Record<string, unknown>;
  secret?: unknown;
}
interface PodSpec {
  serviceAccountName: string;
  automountServiceAccountToken: boolean;
  containers: Container[];
  volumes: Volume[];
}

const podSpec = (objects: readonly KubeObject[]) =>
  (findOne(objects, 'Deployment')['spec'] as { template: { spec: PodSpec } }).template.spec;

describe.each(HELM_VERSIONS)(
  'chart invariants over every gate combination ($label)',
  ({ binary }) => {
    let helm = '';
    beforeAll(async () => {
      helm = join(await buildClusterBinaries(process.env), binary);
    });

    it.each(COMBINATIONS)('gates $name', async ({ rbac, gated, features, policy }) => {
      const objects = await render(helm, {
        values: { rbac, ...RENDER_UNIMPLEMENTED, ...policyValues(policy) },
        implementedFeatures: features,
      });
      const pod = podSpec(objects);

      // No long-lived token anywhere, no Secret volume of any kind in the Pod.
      expect(objects.filter((o) => o['type'] === 'kubernetes.io/service-account-token')).toEqual(
        [],
      );
      expect(pod.volumes.filter((v) => v.secret !== undefined)).toEqual([]);
      expect(pod.automountServiceAccountToken).toBe(false);
      for (const sa of objects.filter((o) => o.kind === 'ServiceAccount')) {
        expect(sa['automountServiceAccountToken']).toBe(false);
      }

      // Exactly one projected ServiceAccount token, of the Pod's ServiceAccount, in one container.
      const projected = pod.volumes.filter((v) =>
        (v.projected?.sources ?? []).some((source) => 'serviceAccountToken' in source),
      );
      expect(projected).toHaveLength(1);
      const tokenVolume = projected[0]?.name ?? '';
      const holders = pod.containers.filter((c) =>
        (c.volumeMounts ?? []).some((m) => m.name === tokenVolume),
      );
      expect(holders.map((c) => c.name)).toEqual([gated ? 'executor' : 'collector']);
      expect(pod.serviceAccountName).toBe(gated ? 'kubexa-agent-executor' : 'kubexa-agent');
      expect(pod.containers.map((c) => c.name)).toEqual(
        gated ? ['collector', 'executor'] : ['collector'],
      );

      // The collector: read verbs only (SSAR aside), nothing that reaches into containers or
      // nodes, no Secrets while the executor exists.
      const collectorRules = rulesOf(findOne(objects, 'ClusterRole', 'kubexa:kubexa-agent'));
      for (const rule of collectorRules) {
        const writes = rule.verbs.filter((v) => (MUTATING_VERBS as readonly string[]).includes(v));
        if (writes.length > 0) expect(rule.resources).toEqual(['selfsubjectaccessreviews']);
        for (const resource of rule.resources ?? []) {
          expect(DANGEROUS_SUBRESOURCES).not.toContain(resource);
          expect(resource.includes('*')).toBe(false);
        }
      }
      expect(grants(collectorRules).has('/secrets:get')).toBe(!gated);

      if (!gated) return;
      // Two users; the collector reaches the socket read-only and its token volume read-only.
      const [collector, executor] = pod.containers;
      expect(collector?.securityContext?.runAsUser).not.toBe(executor?.securityContext?.runAsUser);
      for (const name of ['executor-socket', 'collector-token']) {
        expect(collector?.volumeMounts?.find((m) => m.name === name)?.readOnly, name).toBe(true);
      }
      expect(collector?.env?.map((e) => e.name)).not.toContain('KUBEXA_COLLECTOR_TOKEN_DIR');

      // The executor holds the minting grant and the implemented gates' grants, where the
      // policy says, nothing else; every role it has is bound, every binding resolves.
      const executorRoles = objects.filter(
        (o) => o.kind.endsWith('Role') && o.metadata.name.includes('executor'),
      );
      const rendered = renderedRbacOf(objects, {
        name: 'kubexa-agent-executor',
        namespace: 'kubexa',
      });
      expect({ unbound: rendered.unbound, dangling: rendered.dangling }).toEqual({
        unbound: [],
        dangling: [],
      });
      expect(sortedRbac(rendered)).toEqual(
        sortedRbac(expectedExecutorRbac(rbac, policy, 'kubexa', features)),
      );
      for (const role of executorRoles) {
        for (const rule of rulesOf(role)) {
          const words = [...(rule.apiGroups ?? []), ...(rule.resources ?? []), ...rule.verbs];
          expect(words.filter((w) => w.includes('*'))).toEqual([]);
        }
      }
    });
  },
);
