// Invariants of the rendered chart over EVERY combination of the four privileged gates, on both
// helm versions. The adversarial values are in test/chart/refusals.test.ts (run by
// `npm run test:security` too).
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { buildClusterBinaries } from '../cluster/cluster.js';
import { findOne, grants, HELM_VERSIONS, render, rulesOf, type KubeObject } from '../chart/helm.js';
import {
  DANGEROUS_SUBRESOURCES,
  expectedExecutorClusterGrants,
  MUTATING_VERBS,
  RENDER_UNIMPLEMENTED,
  TOKEN_MINTER_GRANT,
} from '../chart/rbac-expectations.js';

const GATES = ['exec', 'nodeShell', 'nodeOps', 'write'] as const;
const COMBINATIONS = Array.from({ length: 1 << GATES.length }, (_, bits) => {
  const rbac = Object.fromEntries(GATES.map((gate, i) => [gate, (bits & (1 << i)) !== 0]));
  const name = GATES.filter((_gate, i) => (bits & (1 << i)) !== 0).join('+') || 'none';
  return { name, rbac, gated: bits !== 0 };
});

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

    it.each(COMBINATIONS)('gates $name', async ({ rbac, gated }) => {
      const objects = await render(helm, { values: { rbac, ...RENDER_UNIMPLEMENTED } });
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

      // The executor holds the minting grant and the implemented gates' grants, nothing else.
      const executorRoles = objects.filter(
        (o) => o.kind.endsWith('Role') && o.metadata.name.includes('executor'),
      );
      const executorGrants = new Set(executorRoles.flatMap((role) => [...grants(rulesOf(role))]));
      expect(executorGrants).toEqual(
        new Set([TOKEN_MINTER_GRANT, ...expectedExecutorClusterGrants(rbac)]),
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
