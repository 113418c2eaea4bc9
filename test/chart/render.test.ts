// helm template over a values matrix, on helm 3.17 and helm 4.1, asserted as parsed YAML.
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { buildClusterBinaries } from '../cluster/cluster.js';
import {
  CHART_DIR,
  findOne,
  GATE_MATRIX,
  grants,
  HELM_VERSIONS,
  render,
  renderError,
  renderText,
  rulesOf,
  runHelm,
  type KubeObject,
  type Values,
} from './helm.js';
import {
  DANGEROUS_SUBRESOURCES,
  executorEnabled,
  expectedExecutorClusterGrants,
  grantingGates,
  MUTATING_VERBS,
  NODE_SHELL_ROLE_GRANTS,
  RENDER_UNIMPLEMENTED,
  TOKEN_MINTER_GRANT,
  BINDING_SECRET_GRANT,
} from './rbac-expectations.js';

interface Container {
  name: string;
  env?: { name: string; value?: string; valueFrom?: Record<string, unknown> }[];
  ports?: { name: string; containerPort: number }[];
  volumeMounts?: { name: string; mountPath: string; readOnly?: boolean }[];
  securityContext?: Record<string, unknown>;
  livenessProbe?: { httpGet?: { path: string; port: string | number } };
  readinessProbe?: { httpGet?: { path: string; port: string | number } };
}

interface Volume {
  name: string;
  projected?: { sources: Record<string, Record<string, unknown>>[] };
  emptyDir?: Record<string, unknown>;
  persistentVolumeClaim?: { claimName: string };
  configMap?: { name: string };
}

interface PodSpec {
  serviceAccountName: string;
  automountServiceAccountToken: boolean;
  securityContext: Record<string, unknown>;
  containers: Container[];
  volumes: Volume[];
}

interface DeploymentSpec {
  replicas: number;
  strategy: { type: string };
  template: { spec: PodSpec };
}

function deploymentSpec(objects: readonly KubeObject[]): DeploymentSpec {
  return findOne(objects, 'Deployment')['spec'] as DeploymentSpec;
}

function container(objects: readonly KubeObject[], name: string): Container | undefined {
  return deploymentSpec(objects).template.spec.containers.find((c) => c.name === name);
}

function configFile(objects: readonly KubeObject[]): Record<string, unknown> {
  const data = findOne(objects, 'ConfigMap')['data'] as Record<string, string>;
  return parse(data['config.yaml'] ?? '') as Record<string, unknown>;
}

const COLLECTOR_ROLE = 'kubexa:kubexa-agent';
const EXECUTOR_ROLE = 'kubexa:kubexa-agent-executor';

describe.each(HELM_VERSIONS)('chart render ($label)', ({ binary }) => {
  let helm = '';
  beforeAll(async () => {
    helm = join(await buildClusterBinaries(process.env), binary);
  });

  const renderWith = (values: Values, args: readonly string[] = []) =>
    render(helm, { values, args });
  /** A render with privileged gates on, before their features exist (see RENDER_UNIMPLEMENTED). */
  const renderGated = (values: Values) => renderWith({ ...values, ...RENDER_UNIMPLEMENTED });

  describe('gates matrix', () => {
    it.each(GATE_MATRIX)('rbac $name: each gate adds exactly its rules', async ({ rbac }) => {
      const objects = await renderGated({ rbac });
      const hasExecutor = executorEnabled(rbac);

      // The collector's ClusterRole: read verbs only, whatever the gates say.
      const collector = rulesOf(findOne(objects, 'ClusterRole', COLLECTOR_ROLE));
      for (const rule of collector) {
        const mutating = rule.verbs.filter((v) =>
          (MUTATING_VERBS as readonly string[]).includes(v),
        );
        if (mutating.length > 0) {
          // The one exception: asking the API server what this identity may do.
          expect(rule).toEqual({
            apiGroups: ['authorization.k8s.io'],
            resources: ['selfsubjectaccessreviews'],
            verbs: ['create'],
          });
        }
        for (const resource of rule.resources ?? []) {
          expect(DANGEROUS_SUBRESOURCES).not.toContain(resource);
        }
      }
      const collectorGrants = grants(collector);
      for (const forbidden of [
        '/pods/exec:get',
        '/pods/exec:create',
        '/pods:create',
        '/nodes:patch',
        '/pods/eviction:create',
      ]) {
        expect(collectorGrants).not.toContain(forbidden);
      }
      expect(collectorGrants.has('*/*:get')).toBe(rbac.readAll === true);

      // Executor objects exist exactly when a privileged gate is on.
      const executorObjects = objects.filter((o) => o.metadata.name.includes('executor'));
      expect(container(objects, 'executor') !== undefined).toBe(hasExecutor);
      if (!hasExecutor) {
        expect(executorObjects).toEqual([]);
        return;
      }
      expect(executorObjects.map((o) => `${o.kind}/${o.metadata.name}`)).toEqual(
        expect.arrayContaining([
          'ServiceAccount/kubexa-agent-executor',
          'Role/kubexa-agent-executor-token-minter',
          'RoleBinding/kubexa-agent-executor-token-minter',
        ]),
      );
      // Token minting: the collector's ServiceAccount and nothing else; Secrets: create only
      // (the admission policy below narrows it to the one binding Secret).
      expect(rulesOf(findOne(objects, 'Role', 'kubexa-agent-executor-token-minter'))).toEqual([
        {
          apiGroups: [''],
          resources: ['serviceaccounts/token'],
          resourceNames: ['kubexa-agent'],
          verbs: ['create'],
        },
        { apiGroups: [''], resources: ['secrets'], verbs: ['create'] },
      ]);
      expect(
        grants(rulesOf(findOne(objects, 'Role', 'kubexa-agent-executor-token-minter'))),
      ).toEqual(new Set([TOKEN_MINTER_GRANT, BINDING_SECRET_GRANT]));
      // ... and the policy that does it, bound, for the executor's ServiceAccount only.
      const policyName = 'kubexa.kubexa-agent-executor-token-binding';
      const policy = findOne(objects, 'ValidatingAdmissionPolicy', policyName) as unknown as {
        spec: { failurePolicy: string; matchConditions: { expression: string }[] };
      };
      expect({
        failurePolicy: policy.spec.failurePolicy,
        matches: policy.spec.matchConditions.map((c) => c.expression),
        binding: findOne(objects, 'ValidatingAdmissionPolicyBinding', policyName)['spec'],
      }).toEqual({
        failurePolicy: 'Fail',
        matches: [
          'request.userInfo.username == "system:serviceaccount:kubexa:kubexa-agent-executor"',
        ],
        binding: { policyName, validationActions: ['Deny'] },
      });

      const expectedCluster = expectedExecutorClusterGrants(rbac);
      const clusterRoles = objects.filter(
        (o) => o.kind === 'ClusterRole' && o.metadata.name === EXECUTOR_ROLE,
      );
      if (expectedCluster.size === 0) {
        expect(clusterRoles).toEqual([]);
      } else {
        expect(grants(rulesOf(findOne(objects, 'ClusterRole', EXECUTOR_ROLE)))).toEqual(
          expectedCluster,
        );
        const binding = findOne(objects, 'ClusterRoleBinding', EXECUTOR_ROLE);
        expect(binding['subjects']).toEqual([
          { kind: 'ServiceAccount', name: 'kubexa-agent-executor', namespace: 'kubexa' },
        ]);
      }

      const roles = objects.filter(
        (o) => o.kind === 'Role' && o.metadata.name !== 'kubexa-agent-executor-token-minter',
      );
      if (grantingGates(rbac).nodeShell === true) {
        const role = findOne(objects, 'Role', 'kubexa-agent-executor-node-shell');
        expect(role.metadata.namespace).toBe('kubexa');
        expect(grants(rulesOf(role))).toEqual(new Set(NODE_SHELL_ROLE_GRANTS));
        const binding = findOne(objects, 'RoleBinding', 'kubexa-agent-executor-node-shell');
        expect(binding['subjects']).toEqual([
          { kind: 'ServiceAccount', name: 'kubexa-agent-executor', namespace: 'kubexa' },
        ]);
      } else {
        expect(roles).toEqual([]);
      }

      // Executor RBAC never uses a wildcard.
      for (const role of objects.filter(
        (o) =>
          (o.kind === 'ClusterRole' || o.kind === 'Role') && o.metadata.name.includes('executor'),
      )) {
        for (const rule of rulesOf(role)) {
          const words = [...(rule.apiGroups ?? []), ...(rule.resources ?? []), ...rule.verbs];
          expect(words.filter((w) => w.includes('*'))).toEqual([]);
        }
      }
    });

    it('all gates off: no executor object, container, volume, env or name anywhere', async () => {
      const text = await renderText(helm, {});
      expect(text).not.toMatch(/-executor|executor-token|executor-socket|EXECUTOR_SOCKET/);
      expect(text).not.toContain('/run/kubexa');
      const objects = await renderWith({});
      expect(deploymentSpec(objects).template.spec.containers.map((c) => c.name)).toEqual([
        'collector',
      ]);
      expect(objects.filter((o) => o.kind === 'Role' || o.kind === 'RoleBinding')).toEqual([]);
    });

    it('the gates change the collector ClusterRole only by taking Secrets away', async () => {
      const base = grants(rulesOf(findOne(await renderWith({}), 'ClusterRole', COLLECTOR_ROLE)));
      const all = await renderGated({
        rbac: { exec: true, nodeShell: true, nodeOps: true, write: true },
      });
      const gated = grants(rulesOf(findOne(all, 'ClusterRole', COLLECTOR_ROLE)));
      // A token Secret for the executor's ServiceAccount can be created in the release namespace
      // by anyone who may create Secrets there: with the executor present, the collector must
      // not be able to read it, and RBAC cannot exclude one Secret.
      expect([...base].filter((grant) => !gated.has(grant)).sort()).toEqual([
        '/secrets:get',
        '/secrets:list',
        '/secrets:watch',
      ]);
      expect([...gated].filter((grant) => !base.has(grant))).toEqual([]);
    });

    it('refuses every way of letting the collector read Secrets while the executor exists', async () => {
      for (const [rbac, key] of [
        [{ exec: true, collectorReadsSecrets: true }, 'rbac.collectorReadsSecrets=true'],
        [{ nodeOps: true, readAll: true }, 'rbac.readAll'],
        [
          { write: true, extraRules: [{ resources: ['secrets'], verbs: ['get'] }] },
          'rbac.extraRules[0]',
        ],
      ] as const) {
        expect(await renderError(helm, { values: { rbac, ...RENDER_UNIMPLEMENTED } })).toContain(
          key,
        );
      }
      const readable = grants(
        rulesOf(
          findOne(
            await renderWith({ rbac: { collectorReadsSecrets: false } }),
            'ClusterRole',
            COLLECTOR_ROLE,
          ),
        ),
      );
      expect(readable.has('/secrets:get')).toBe(false);
    });

    it('never falls back to the namespace default ServiceAccount', async () => {
      const stderr = await renderError(helm, { values: { serviceAccount: { create: false } } });
      expect(stderr).toContain('serviceAccount.name is required when serviceAccount.create=false');
    });

    it('refuses extraRules that reach into containers or nodes, or use a wildcard', async () => {
      for (const resource of ['pods/exec', 'nodes/proxy', 'pods/portforward', '*', 'pods/*']) {
        const stderr = await renderError(helm, {
          values: { rbac: { extraRules: [{ resources: [resource], verbs: ['get'] }] } },
        });
        expect(stderr).toContain(`rbac.extraRules[0].resources has "${resource}"`);
      }
    });

    it('the collector reads logs, events, state, metrics and may ask SelfSubjectAccessReviews', async () => {
      const g = grants(rulesOf(findOne(await renderWith({}), 'ClusterRole', COLLECTOR_ROLE)));
      for (const needed of [
        '/pods:list',
        '/pods:watch',
        '/pods/log:get',
        '/namespaces:get',
        '/events:watch',
        'events.k8s.io/events:list',
        '/secrets:list',
        'apps/deployments:watch',
        'metrics.k8s.io/pods:list',
        'metrics.k8s.io/nodes:get',
        'authorization.k8s.io/selfsubjectaccessreviews:create',
      ]) {
        expect(g).toContain(needed);
      }
    });

    it('rbac.create=false renders no Role or binding, but the gated executor still runs', async () => {
      const objects = await renderGated({ rbac: { create: false, exec: true, nodeShell: true } });
      expect(
        objects.filter((o) => /^(Cluster)?Role(Binding)?$/.test(o.kind)).map((o) => o.kind),
      ).toEqual([]);
      expect(container(objects, 'executor')).toBeDefined();
      findOne(objects, 'ServiceAccount', 'kubexa-agent-executor');
    });

    it('rbac.extraRules are appended to the collector ClusterRole', async () => {
      const rule = { apiGroups: ['example.com'], resources: ['widgets'], verbs: ['get', 'list'] };
      const objects = await renderWith({ rbac: { extraRules: [rule] } });
      expect(rulesOf(findOne(objects, 'ClusterRole', COLLECTOR_ROLE)).at(-1)).toEqual(rule);
    });

    it('cluster-scoped names carry the namespace, so releases never collide', async () => {
      const gated = { rbac: { exec: true }, ...RENDER_UNIMPLEMENTED };
      const a = await render(helm, { namespace: 'team-a', values: gated });
      const b = await render(helm, { namespace: 'team-b', values: gated });
      const names = (objects: KubeObject[]) =>
        objects
          .filter((o) => o.kind.startsWith('Cluster'))
          .map((o) => o.metadata.name)
          .sort();
      // No executor ClusterRole: no exec.pod.rules name a pod, so the exec gate grants nothing.
      expect(names(a)).toEqual(['team-a:kubexa-agent', 'team-a:kubexa-agent']);
      expect(names(a).filter((n) => names(b).includes(n))).toEqual([]);
    });
  });

  describe('Deployment', () => {
    it('is a singleton with strategy Recreate', async () => {
      const spec = deploymentSpec(await renderWith({}));
      expect(spec.replicas).toBe(1);
      expect(spec.strategy).toEqual({ type: 'Recreate' });
    });

    it('runs every container non-root, read-only, without capabilities, under RuntimeDefault', async () => {
      const objects = await renderGated({
        rbac: { exec: true, nodeShell: true, nodeOps: true, write: true },
      });
      const pod = deploymentSpec(objects).template.spec;
      expect(pod.securityContext).toMatchObject({
        runAsNonRoot: true,
        runAsUser: 65532,
        seccompProfile: { type: 'RuntimeDefault' },
      });
      expect(pod.containers.map((c) => c.name)).toEqual(['collector', 'executor']);
      const uids: Record<string, unknown> = {
        collector: { runAsUser: 65532 },
        executor: { runAsUser: 65533, runAsGroup: 65533 },
      };
      for (const c of pod.containers) {
        expect(c.securityContext).toEqual({
          runAsNonRoot: true,
          allowPrivilegeEscalation: false,
          readOnlyRootFilesystem: true,
          privileged: false,
          capabilities: { drop: ['ALL'] },
          seccompProfile: { type: 'RuntimeDefault' },
          ...(uids[c.name] as object),
        });
      }
    });

    it('all gates off: the collector runs as its own ServiceAccount with its own projected token', async () => {
      const objects = await renderWith({});
      const pod = deploymentSpec(objects).template.spec;
      expect(pod.serviceAccountName).toBe('kubexa-agent');
      expect(pod.automountServiceAccountToken).toBe(false);
      const sources = pod.volumes.find((v) => v.name === 'collector-token')?.projected?.sources;
      expect(sources?.[0]?.['serviceAccountToken']).toEqual({
        path: 'token',
        expirationSeconds: 3607,
      });
    });

    it('with a gate on: the Pod is the executor, the collector gets a minted token only', async () => {
      const objects = await renderGated({ rbac: { exec: true } });
      const pod = deploymentSpec(objects).template.spec;
      // A projected token is always the Pod's ServiceAccount's: the executor's, then.
      expect(pod.serviceAccountName).toBe('kubexa-agent-executor');
      expect(pod.automountServiceAccountToken).toBe(false);
      const tokenPath = '/var/run/secrets/kubernetes.io/serviceaccount';
      const mounts = (name: string) =>
        (container(objects, name)?.volumeMounts ?? []).map((m) => m.name);
      expect(mounts('collector')).toContain('collector-token');
      expect(mounts('collector')).not.toContain('executor-token');
      expect(mounts('executor')).toContain('executor-token');
      expect(mounts('executor')).not.toContain('data');
      for (const name of ['collector', 'executor']) {
        const tokenMounts = (container(objects, name)?.volumeMounts ?? []).filter(
          (m) => m.mountPath === tokenPath,
        );
        expect(tokenMounts).toHaveLength(1);
        expect(tokenMounts[0]?.readOnly).toBe(true);
      }
      // The collector's token volume is written by the executor (minted), read by the collector.
      expect(container(objects, 'executor')?.volumeMounts).toContainEqual({
        name: 'collector-token',
        mountPath: '/run/kubexa-collector-token',
      });
      const volume = (name: string) => pod.volumes.find((v) => v.name === name);
      expect(volume('collector-token')).toEqual({
        name: 'collector-token',
        emptyDir: { medium: 'Memory', sizeLimit: '1Mi' },
      });
      // The one projected ServiceAccount token in the Pod is the executor's, in its container.
      const projectedTokens = pod.volumes.filter((v) =>
        (v.projected?.sources ?? []).some((source) => 'serviceAccountToken' in source),
      );
      expect(projectedTokens.map((v) => v.name)).toEqual(['executor-token']);
      const env = container(objects, 'executor')?.env ?? [];
      expect(env).toContainEqual({
        name: 'KUBEXA_COLLECTOR_SERVICE_ACCOUNT',
        value: 'kubexa-agent',
      });
      expect(env).toContainEqual({
        name: 'KUBEXA_POD_UID',
        valueFrom: { fieldRef: { fieldPath: 'metadata.uid' } },
      });
      // Both ServiceAccounts refuse automounting on their own as well.
      for (const sa of objects.filter((o) => o.kind === 'ServiceAccount')) {
        expect(sa['automountServiceAccountToken']).toBe(false);
      }
    });

    it.each(GATE_MATRIX)(
      'rbac $name: no Secret of type service-account-token, no Secret volume of a token',
      async ({ rbac }) => {
        const objects = await renderGated({ rbac });
        expect(
          objects.filter(
            (o) => o.kind === 'Secret' && o['type'] === 'kubernetes.io/service-account-token',
          ),
        ).toEqual([]);
        const text = JSON.stringify(objects);
        expect(text).not.toContain('service-account-token');
        expect(text).not.toMatch(/"secretName":"[^"]*executor/);
      },
    );

    it('shares the socket directory and nothing else writable between the two containers', async () => {
      const objects = await renderGated({ rbac: { nodeOps: true } });
      const pod = deploymentSpec(objects).template.spec;
      expect(pod.volumes.find((v) => v.name === 'executor-socket')?.emptyDir).toMatchObject({
        medium: 'Memory',
      });
      // The collector mounts the socket's parent read-only: it can connect, never plant a file.
      expect(container(objects, 'collector')?.volumeMounts).toContainEqual({
        name: 'executor-socket',
        mountPath: '/run/kubexa',
        readOnly: true,
      });
      expect(container(objects, 'executor')?.volumeMounts).toContainEqual({
        name: 'executor-socket',
        mountPath: '/run/kubexa',
      });
      for (const name of ['collector', 'executor']) {
        expect(container(objects, name)?.env).toContainEqual({
          name: 'KUBEXA_EXECUTOR_SOCKET',
          value: '/run/kubexa/executor/executor.sock',
        });
      }
      expect(container(objects, 'executor')?.env).toContainEqual({
        name: 'KUBEXA_SHARED_GID',
        value: '65532',
      });
      // The tenant token reaches the collector only.
      const envNames = (name: string) => (container(objects, name)?.env ?? []).map((e) => e.name);
      expect(envNames('collector')).toContain('KUBEXA_TENANT_TOKEN');
      expect(envNames('executor')).not.toContain('KUBEXA_TENANT_TOKEN');
    });

    it('probes /healthz and /readyz on the collector health port', async () => {
      const objects = await renderWith({
        observability: { healthAddr: ':18080', metricsAddr: '0.0.0.0:19090' },
      });
      const c = container(objects, 'collector');
      expect(c?.livenessProbe?.httpGet).toEqual({ path: '/healthz', port: 'health' });
      expect(c?.readinessProbe?.httpGet).toEqual({ path: '/readyz', port: 'health' });
      expect(c?.ports).toEqual([
        { name: 'health', containerPort: 18080, protocol: 'TCP' },
        { name: 'metrics', containerPort: 19090, protocol: 'TCP' },
      ]);
      const service = findOne(objects, 'Service');
      expect(service['spec']).toMatchObject({
        ports: [{ name: 'metrics', port: 9090, targetPort: 'metrics' }],
      });
    });

    it('mounts a PVC at /var/lib/kubexa, or an emptyDir with persistence off', async () => {
      const withPvc = await renderWith({ persistence: { storageClass: 'fast', size: '5Gi' } });
      const pvc = findOne(withPvc, 'PersistentVolumeClaim', 'kubexa-agent-data');
      expect(pvc['spec']).toMatchObject({
        storageClassName: 'fast',
        accessModes: ['ReadWriteOnce'],
        resources: { requests: { storage: '5Gi' } },
      });
      expect(deploymentSpec(withPvc).template.spec.volumes.find((v) => v.name === 'data')).toEqual({
        name: 'data',
        persistentVolumeClaim: { claimName: 'kubexa-agent-data' },
      });
      expect(container(withPvc, 'collector')?.volumeMounts).toContainEqual({
        name: 'data',
        mountPath: '/var/lib/kubexa',
      });

      const existing = await renderWith({ persistence: { existingClaim: 'mine' } });
      expect(existing.filter((o) => o.kind === 'PersistentVolumeClaim')).toEqual([]);
      expect(deploymentSpec(existing).template.spec.volumes.find((v) => v.name === 'data')).toEqual(
        { name: 'data', persistentVolumeClaim: { claimName: 'mine' } },
      );

      const off = await renderWith({ persistence: { enabled: false } });
      expect(off.filter((o) => o.kind === 'PersistentVolumeClaim')).toEqual([]);
      expect(deploymentSpec(off).template.spec.volumes.find((v) => v.name === 'data')).toEqual({
        name: 'data',
        emptyDir: {},
      });
    });
  });

  describe('tenant token Secret', () => {
    it('creates the Secret and feeds KUBEXA_TENANT_TOKEN from it', async () => {
      const objects = await renderWith({ secret: { tenantToken: 't0ken' } });
      const secret = findOne(objects, 'Secret', 'kubexa-agent-token');
      expect(secret['stringData']).toEqual({ 'tenant-token': 't0ken' });
      expect(container(objects, 'collector')?.env).toContainEqual({
        name: 'KUBEXA_TENANT_TOKEN',
        valueFrom: { secretKeyRef: { name: 'kubexa-agent-token', key: 'tenant-token' } },
      });
      expect(JSON.stringify(findOne(objects, 'ConfigMap'))).not.toContain('t0ken');
    });

    it('uses secret.existingSecret and renders no Secret of its own', async () => {
      const objects = await renderWith({
        secret: { tenantToken: '', existingSecret: 'mine', existingSecretKey: 'token' },
      });
      expect(objects.filter((o) => o.kind === 'Secret')).toEqual([]);
      expect(container(objects, 'collector')?.env).toContainEqual({
        name: 'KUBEXA_TENANT_TOKEN',
        valueFrom: { secretKeyRef: { name: 'mine', key: 'token' } },
      });
    });

    it('refuses to render without a token or an existing Secret', async () => {
      expect(await renderError(helm, { values: { secret: { tenantToken: '' } } })).toContain(
        'secret.tenantToken is required',
      );
    });

    it('refuses agent.tenantToken, which would land in a ConfigMap', async () => {
      // The schema refuses the key; the template refuses it too should a schema ever let it by.
      expect(await renderError(helm, { values: { agent: { tenantToken: 'x' } } })).toMatch(
        /tenantToken/,
      );
    });
  });

  describe('agent config file', () => {
    it('maps camelCase values to snake_case and copies rule lists verbatim', async () => {
      const rule = {
        id: 'stage-api',
        namespace: 'stage',
        pod_names: ['be-*'],
        label_selector: 'log=backend-log',
      };
      const objects = await renderWith({
        collect: { logs: { tailLines: 50, rules: [rule] }, state: { resyncPeriod: 0 } },
        buffer: { maxMemoryBytes: 33554432, flushInterval: '2s' },
        exec: { pod: { enabled: true, maxSessionSec: 600 } },
        gateway: { host: 'gw.example.com', port: 8443 },
      });
      const config = configFile(objects);
      expect(config).toMatchObject({
        gateway: {
          address: 'gw.example.com:8443',
          tls: true,
          dial_timeout: '10s',
          reconnect_initial_delay: '1s',
        },
        collect: {
          logs: {
            tail_lines: 50,
            rules: [rule],
            exclude_namespaces: ['kube-system', 'kube-public'],
          },
          // A bare 0 at a block duration is written as the string "0".
          state: { resync_period: '0', redact_secrets: false },
        },
        buffer: {
          max_memory_bytes: 33554432,
          flush_interval: '2s',
          spill_dir: '/var/lib/kubexa/spill',
        },
        exec: { pod: { enabled: true, max_session_sec: 600 } },
        observability: { health_addr: ':8080', metrics_addr: ':9090' },
        log: { level: 'info', format: 'json' },
      });
      expect(config['agent']).toEqual({});
      const gateway = config['gateway'] as Record<string, unknown>;
      expect(gateway).not.toHaveProperty('host');
      expect(gateway).not.toHaveProperty('port');
      // query.redactSecrets is absent so the agent inherits collect.state.redact_secrets.
      expect(config['query']).toEqual({ enabled: true, rules: [] });
      // Only the agent's own sections reach the file.
      expect(Object.keys(config).sort()).toEqual(
        [
          'agent',
          'buffer',
          'collect',
          'exec',
          'gateway',
          'log',
          'mutate',
          'observability',
          'query',
          'security',
        ].sort(),
      );
    });

    it('gateway.address wins over host and port', async () => {
      const config = configFile(
        await renderWith({ gateway: { address: 'gw:1234', host: 'ignored' } }),
      );
      expect(config['gateway']).toMatchObject({ address: 'gw:1234' });
    });

    it('restarts the Pod when the config changes', async () => {
      const checksum = async (values: Values) => {
        const spec = findOne(await renderWith(values), 'Deployment')['spec'] as {
          template: { metadata: { annotations: Record<string, string> } };
        };
        return spec.template.metadata.annotations['checksum/config'];
      };
      expect(await checksum({})).not.toBe(await checksum({ log: { level: 'debug' } }));
    });
  });

  describe('Service and ServiceMonitor', () => {
    it('renders a ServiceMonitor on the metrics port when asked', async () => {
      const objects = await renderWith({
        serviceMonitor: { enabled: true, labels: { release: 'prom' }, interval: '15s' },
      });
      const monitor = findOne(objects, 'ServiceMonitor');
      expect(monitor.metadata.labels).toMatchObject({ release: 'prom' });
      expect(monitor['spec']).toMatchObject({
        endpoints: [{ port: 'metrics', path: '/metrics', interval: '15s', scrapeTimeout: '10s' }],
      });
    });

    it('renders no ServiceMonitor by default and refuses one without the Service', async () => {
      expect((await renderWith({})).filter((o) => o.kind === 'ServiceMonitor')).toEqual([]);
      expect(
        await renderError(helm, {
          values: { serviceMonitor: { enabled: true }, service: { enabled: false } },
        }),
      ).toContain('serviceMonitor.enabled needs service.enabled');
    });
  });
});

describe('NOTES.txt (helm 4.1 client dry-run)', () => {
  const notes = async (args: readonly string[]) => {
    const helm = join(await buildClusterBinaries(process.env), 'helm');
    const out = await runHelm(helm, [
      'install',
      'kubexa-agent',
      CHART_DIR,
      '--dry-run=client',
      '--namespace',
      'kubexa',
      '--set',
      'secret.tenantToken=t',
      ...args,
    ]);
    return out.slice(out.indexOf('NOTES:'));
  };

  it('says the executor is not deployed with every gate off', async () => {
    const text = await notes([]);
    expect(text).toContain('Gateway: gateway.kubexa.dev:443 (tls: true)');
    expect(text).toContain('executor   not deployed');
  });

  it('lists each gate that is on, with its config switch', async () => {
    // Node jobs need verbs: the chart refuses mutate.node.enabled without them, as the agent does.
    const text = await notes([
      '--set',
      'rbac.nodeOps=true',
      '--set',
      'mutate.node.enabled=true',
      '--set',
      'executor.renderUnimplemented=true',
      '--set',
      'mutate.node.verbs={cordon}',
    ]);
    expect(text).toContain('ServiceAccount kubexa-agent-executor');
    expect(text).toContain('mutate.node.enabled=true');
    expect(text).not.toContain('rbac.exec ');
  });

  it('says where each gate applies: the namespaces the rules name, or cluster-wide', async () => {
    const text = await notes([
      '--set',
      'executor.renderUnimplemented=true',
      '--set',
      'rbac.exec=true',
      '--set',
      'rbac.write=true',
      '--set',
      'rbac.nodeShell=true',
      '--set',
      'exec.node.namespace=shells',
      '--set-json',
      'exec.pod.rules=[{"namespace":"team-b"},{"namespace":"team-a"}]',
      '--set-json',
      'mutate.rules=[{"namespace":"team-*","resources":["deployments"],"verbs":["scale"]}]',
    ]);
    expect(text).toContain('only in namespace(s) team-a, team-b');
    expect(text).toContain('cluster-wide: a mutate.rules entry names a pattern');
    expect(text).toContain('helper pods in shells');
    expect(text).toContain('kubexa gets pods list/delete only (orphan sweep)');
  });

  it('says what each security profile grants', async () => {
    expect(await notes([])).toContain('Secret values leave the cluster unless');
    const strict = await notes(['--set', 'security.profile=strict']);
    expect(strict).toContain('Security profile: strict');
    expect(strict).toContain('verified TLS only');
  });
});
