// The chart's RBAC against a real API server: for each gate combination the rendered chart is
// applied into its own namespace, then SubjectAccessReviews ask the API server what the
// collector's and the executor's ServiceAccounts may really do.
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { Agent, type RequestOptions } from 'node:https';
import {
  AuthorizationV1Api,
  CoreV1Api,
  createConfiguration,
  KubeConfig,
  ServerConfiguration,
  type Middleware,
  type V1ResourceAttributes,
} from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { GATE_MATRIX, renderText, type GateValues } from '../chart/helm.js';
import {
  DANGEROUS_SUBRESOURCES,
  ENUMERATED_RESOURCES,
  EXECUTOR_CLUSTER_GRANTS,
  executorEnabled,
  expectedExecutorClusterGrants,
  grantingGates,
  NODE_SHELL_ROLE_GRANTS,
  RENDER_UNIMPLEMENTED,
  SCALE_SUBRESOURCES,
  TOKEN_MINTER_GRANT,
  BINDING_SECRET_GRANT,
} from '../chart/rbac-expectations.js';

const execFileAsync = promisify(execFile);

const RELEASE = 'kubexa-agent';
const COLLECTOR_SA = 'kubexa-agent';
const EXECUTOR_SA = 'kubexa-agent-executor';
/** A namespace no release lives in: nodeShell must not reach it. */
const OTHER_NAMESPACE = 'default';

const namespaceOf = (combination: string) => `kubexa-rbac-${combination}`;

/** "group/resource[/sub]:verb" -> SAR resource attributes in a namespace ("" = cluster-wide). */
function attributes(grant: string, namespace: string): V1ResourceAttributes {
  const [resourcePart = '', verb = ''] = grant.split(':');
  const [group = '', resource = '', subresource] = resourcePart.split('/');
  return {
    group,
    resource,
    verb,
    namespace,
    ...(subresource === undefined ? {} : { subresource }),
  };
}

interface Check {
  /** The release namespace, where the ServiceAccount lives. */
  readonly home: string;
  readonly sa: string;
  readonly grant: string;
  readonly namespace: string;
}

const describeCheck = (c: Check) => `${c.sa} ${c.grant} in ${c.namespace || '<cluster>'}`;

async function mapLimit<T, R>(items: readonly T[], limit: number, fn: (item: T) => Promise<R>) {
  const results: R[] = new Array<R>(items.length);
  let next = 0;
  const workers = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) {
      const index = next++;
      results[index] = await fn(items[index]!);
    }
  });
  await Promise.all(workers);
  return results;
}

describe('chart RBAC on a real API server', () => {
  const kubeconfigPath = inject('kubeconfigPath');
  const binDir = inject('clusterBinDir');
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfigPath);
  const core = kc.makeApiClient(CoreV1Api);
  let authz: AuthorizationV1Api | undefined;
  let agent: Agent | undefined;
  let workdir = '';

  /**
   * client-node 1.4 builds a new https.Agent (a new TLS handshake) for every call; hundreds of
   * SubjectAccessReviews go much faster over one keep-alive agent with the same credentials.
   */
  async function keepAliveAuthorizationApi(): Promise<AuthorizationV1Api> {
    const tls: RequestOptions = {};
    await kc.applyToHTTPSOptions(tls);
    const { ca, cert, key, pfx, passphrase, rejectUnauthorized, servername } = tls;
    agent = new Agent({
      ...(ca === undefined ? {} : { ca }),
      ...(cert === undefined ? {} : { cert }),
      ...(key === undefined ? {} : { key }),
      ...(pfx === undefined ? {} : { pfx }),
      ...(passphrase === undefined ? {} : { passphrase }),
      ...(rejectUnauthorized === undefined ? {} : { rejectUnauthorized }),
      ...(servername === undefined ? {} : { servername }),
      keepAlive: true,
      maxSockets: 48,
    });
    const shared = agent;
    const useSharedAgent: Middleware = {
      pre: (context) => {
        context.setAgent(shared);
        return Promise.resolve(context);
      },
      post: (context) => Promise.resolve(context),
    };
    const server = kc.getCurrentCluster()?.server;
    if (server === undefined) throw new Error('kubeconfig has no current cluster');
    return new AuthorizationV1Api(
      createConfiguration({
        baseServer: new ServerConfiguration(server, {}),
        authMethods: { default: kc },
        promiseMiddleware: [useSharedAgent],
      }),
    );
  }

  const kubectl = (args: readonly string[]) =>
    execFileAsync(join(binDir, 'kubectl'), ['--kubeconfig', kubeconfigPath, ...args], {
      maxBuffer: 16 * 1024 * 1024,
    });

  /** allowed() for one named object (resourceNames). */
  async function allowedNamed(check: Check & { readonly name: string }): Promise<boolean> {
    if (authz === undefined) throw new Error('beforeAll did not run');
    const review = await authz.createSubjectAccessReview({
      body: {
        apiVersion: 'authorization.k8s.io/v1',
        kind: 'SubjectAccessReview',
        spec: {
          user: `system:serviceaccount:${check.home}:${check.sa}`,
          groups: ['system:serviceaccounts', `system:serviceaccounts:${check.home}`],
          resourceAttributes: Object.assign(attributes(check.grant, check.namespace), {
            name: check.name,
          }),
        },
      },
    });
    return review.status?.allowed === true;
  }

  async function allowed(check: Check): Promise<boolean> {
    if (authz === undefined) throw new Error('beforeAll did not run');
    const review = await authz.createSubjectAccessReview({
      body: {
        apiVersion: 'authorization.k8s.io/v1',
        kind: 'SubjectAccessReview',
        spec: {
          user: `system:serviceaccount:${check.home}:${check.sa}`,
          groups: [
            'system:serviceaccounts',
            `system:serviceaccounts:${check.home}`,
            'system:authenticated',
          ],
          resourceAttributes: attributes(check.grant, check.namespace),
        },
      },
    });
    return review.status?.allowed === true;
  }

  const check = (home: string, sa: string, grant: string, namespace: string): Check => ({
    home,
    sa,
    grant,
    namespace,
  });

  /** Waits until the RBAC authorizer has seen the new bindings, then answers every check. */
  async function review(
    checks: readonly Check[],
    mustAllow: readonly Check[],
  ): Promise<Map<Check, boolean>> {
    const deadline = Date.now() + 20_000;
    while (mustAllow.length > 0) {
      const answers = await mapLimit(mustAllow, 32, allowed);
      if (answers.every(Boolean) || Date.now() > deadline) break;
      await sleep(200);
    }
    const answers = await mapLimit(checks, 48, allowed);
    return new Map(checks.map((c, i) => [c, answers[i] === true]));
  }

  beforeAll(async () => {
    workdir = await mkdtemp(join(tmpdir(), 'kubexa-rbac-'));
    authz = await keepAliveAuthorizationApi();
    await Promise.all(
      GATE_MATRIX.map(async ({ name, rbac }) => {
        const namespace = namespaceOf(name);
        const manifest = await renderText(join(binDir, 'helm'), {
          release: RELEASE,
          namespace,
          values: { rbac, persistence: { enabled: false }, ...RENDER_UNIMPLEMENTED },
        });
        const path = join(workdir, `${name}.yaml`);
        await writeFile(path, manifest);
        await kubectl(['create', 'namespace', namespace]);
        await kubectl(['apply', '--namespace', namespace, '-f', path]);
      }),
    );
  });

  afterAll(async () => {
    agent?.destroy();
    if (workdir === '') return;
    await Promise.all(
      GATE_MATRIX.map(async ({ name }) => {
        await kubectl([
          'delete',
          '--ignore-not-found',
          '--wait=false',
          '-f',
          join(workdir, `${name}.yaml`),
        ]).catch(() => undefined);
        await kubectl(['delete', 'namespace', namespaceOf(name), '--wait=false']).catch(
          () => undefined,
        );
      }),
    );
    await rm(workdir, { recursive: true, force: true });
  });

  /** What the collector needs: reads across the cluster, never a write, exec, eviction or patch. */
  function collectorChecks(home: string, gates: GateValues) {
    const c = (grant: string, namespace: string) => check(home, COLLECTOR_SA, grant, namespace);
    const mustAllow = [
      c('/pods:list', ''),
      c('/pods:watch', ''),
      c('/pods:get', OTHER_NAMESPACE),
      c('/pods/log:get', OTHER_NAMESPACE),
      c('/namespaces:get', ''),
      c('/events:watch', ''),
      c('events.k8s.io/events:list', ''),
      // With the executor present the collector does not read Secrets (kubexa.collectorReadsSecrets).
      ...(executorEnabled(gates) ? [] : [c('/secrets:list', '')]),
      c('/nodes:watch', ''),
      c('apps/deployments:watch', ''),
      c('apps/replicasets:get', OTHER_NAMESPACE),
      c('batch/jobs:get', OTHER_NAMESPACE),
      c('networking.k8s.io/ingresses:list', ''),
      c('metrics.k8s.io/pods:list', ''),
      c('metrics.k8s.io/nodes:get', ''),
      c('authorization.k8s.io/selfsubjectaccessreviews:create', ''),
    ];
    const writes = ENUMERATED_RESOURCES.flatMap(({ group, resources }) =>
      resources.flatMap((resource) =>
        ['create', 'update', 'patch', 'delete', 'deletecollection'].map((verb) =>
          c(`${group}/${resource}:${verb}`, resource === 'nodes' ? '' : home),
        ),
      ),
    );
    const scale = SCALE_SUBRESOURCES.flatMap(({ group, resources }) =>
      resources.flatMap((resource) =>
        ['update', 'patch'].map((verb) => c(`${group}/${resource}:${verb}`, home)),
      ),
    );
    // rbac.readAll's wildcard grants get on every subresource; create stays denied.
    const shells = DANGEROUS_SUBRESOURCES.flatMap((resource) => [
      c(`/${resource}:create`, resource.startsWith('nodes') ? '' : home),
      ...(gates.readAll === true
        ? []
        : [c(`/${resource}:get`, resource.startsWith('nodes') ? '' : home)]),
    ]);
    const mustDeny = [
      c('/pods:create', home),
      c('/pods:create', OTHER_NAMESPACE),
      c('/pods/exec:create', OTHER_NAMESPACE),
      c('/nodes:patch', ''),
      c('/pods/eviction:create', OTHER_NAMESPACE),
      c('/secrets:delete', OTHER_NAMESPACE),
      ...(executorEnabled(gates)
        ? [c('/secrets:get', home), c('/secrets:list', home), c('/secrets:watch', '')]
        : []),
      ...writes,
      ...scale,
      ...shells,
    ];
    return { mustAllow, mustDeny };
  }

  /**
   * Every grant any gate could give the executor, asked cluster-wide, in the release namespace
   * and in another namespace, plus reads it never needs. Allowed exactly when a gate grants it.
   */
  function executorChecks(home: string, gates: GateValues) {
    const universe = new Set([
      ...EXECUTOR_CLUSTER_GRANTS.exec,
      ...EXECUTOR_CLUSTER_GRANTS.nodeOps,
      ...EXECUTOR_CLUSTER_GRANTS.write,
      ...NODE_SHELL_ROLE_GRANTS,
      '/secrets:get',
      '/secrets:list',
      '/pods/log:get',
      '/pods:watch',
      '/nodes:list',
      '/nodes:delete',
      'apps/daemonsets:list',
      '/pods/attach:create',
      '/pods/portforward:create',
      '/nodes/proxy:get',
      'rbac.authorization.k8s.io/clusterroles:escalate',
      'rbac.authorization.k8s.io/clusterroles:bind',
      '/serviceaccounts:impersonate',
      '/serviceaccounts/token:create',
      BINDING_SECRET_GRANT,
    ]);
    const cluster = expectedExecutorClusterGrants(gates);
    const role = new Set(grantingGates(gates).nodeShell === true ? NODE_SHELL_ROLE_GRANTS : []);
    // With any gate on, the executor creates the Secret its minted collector token is bound to,
    // in the release namespace only (an admission policy narrows it to that one Secret).
    if (executorEnabled(gates)) role.add(BINDING_SECRET_GRANT);
    const all = [...universe].flatMap((grant) =>
      [home, OTHER_NAMESPACE, ''].map((namespace) => ({
        check: check(home, EXECUTOR_SA, grant, namespace),
        expected: cluster.has(grant) || (namespace === home && role.has(grant)),
      })),
    );
    return all;
  }

  it.each(GATE_MATRIX)(
    'rbac $name: the collector reads and never writes; the executor holds exactly its gates',
    async ({ name, rbac }) => {
      const home = namespaceOf(name);
      const collector = collectorChecks(home, rbac);
      const executor = executorChecks(home, rbac);
      const mustAllow = [
        ...collector.mustAllow,
        ...executor.filter((e) => e.expected).map((e) => e.check),
      ];
      const answers = await review(
        [...collector.mustAllow, ...collector.mustDeny, ...executor.map((e) => e.check)],
        mustAllow,
      );

      const wrong: string[] = [];
      for (const c of collector.mustAllow) {
        if (answers.get(c) !== true) wrong.push(`denied: ${describeCheck(c)}`);
      }
      for (const c of collector.mustDeny) {
        if (answers.get(c) !== false) wrong.push(`allowed: ${describeCheck(c)}`);
      }
      for (const { check: c, expected } of executor) {
        if (answers.get(c) !== expected) {
          wrong.push(`${expected ? 'denied' : 'allowed'}: ${describeCheck(c)}`);
        }
      }
      expect(wrong).toEqual([]);
      if (rbac.readAll === true) {
        // The wildcard reaches CRDs and every group.
        expect(await allowed(check(home, COLLECTOR_SA, 'example.com/widgets:list', ''))).toBe(true);
      }

      // The executor's identity exists, with a token, only when a gate is on.
      const gated = [rbac.exec, rbac.nodeShell, rbac.nodeOps, rbac.write].some((g) => g === true);
      const accounts = await core.listNamespacedServiceAccount({ namespace: home });
      expect(
        accounts.items
          .map((sa) => sa.metadata?.name)
          .filter((n) => n !== 'default')
          .sort(),
      ).toEqual(gated ? [COLLECTOR_SA, EXECUTOR_SA] : [COLLECTOR_SA]);
      // No long-lived token anywhere: no Secret of type service-account-token in the namespace.
      const secrets = await core.listNamespacedSecret({ namespace: home });
      expect(
        secrets.items
          .filter((secret) => secret.type === 'kubernetes.io/service-account-token')
          .map((secret) => secret.metadata?.name),
      ).toEqual([]);
      if (gated) {
        // The executor may mint the collector's token, and no other ServiceAccount's.
        const named = (name: string, namespace: string) => ({
          ...check(home, EXECUTOR_SA, TOKEN_MINTER_GRANT, namespace),
          name,
        });
        expect(await allowedNamed(named(COLLECTOR_SA, home))).toBe(true);
        for (const [name, namespace] of [
          [EXECUTOR_SA, home],
          ['default', home],
          [COLLECTOR_SA, OTHER_NAMESPACE],
          ['kubexa-agent', namespaceOf('off')],
        ] as const) {
          expect(await allowedNamed(named(name, namespace)), `${name} in ${namespace}`).toBe(false);
        }
      }
    },
  );

  it('rbac nodeshell reaches only the release namespace', async () => {
    const home = namespaceOf('nodeshell');
    const elsewhere = [OTHER_NAMESPACE, namespaceOf('off'), namespaceOf('exec'), 'kube-system'];
    const inHome = NODE_SHELL_ROLE_GRANTS.map((g) => check(home, EXECUTOR_SA, g, home));
    const outside = elsewhere.flatMap((ns) =>
      NODE_SHELL_ROLE_GRANTS.map((g) => check(home, EXECUTOR_SA, g, ns)),
    );
    const clusterWide = NODE_SHELL_ROLE_GRANTS.map((g) => check(home, EXECUTOR_SA, g, ''));
    // Until node consoles are implemented the gate grants nothing, even at home.
    const granted = grantingGates({ nodeShell: true }).nodeShell === true;
    const allowedHere = granted ? inHome : [];
    const answers = await review([...inHome, ...outside, ...clusterWide], allowedHere);
    expect(allowedHere.filter((c) => answers.get(c) !== true).map(describeCheck)).toEqual([]);
    expect(
      [...(granted ? [] : inHome), ...outside, ...clusterWide]
        .filter((c) => answers.get(c) !== false)
        .map(describeCheck),
    ).toEqual([]);
  });
});
