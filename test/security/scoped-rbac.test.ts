// The executor's RBAC scoped to the policy, on the real API server, with the executor's real
// token: the chart (every feature implemented, as chartWithFeatures renders it) is applied with
// exec.pod.rules and mutate.rules naming one namespace and node-console helpers in their own
// namespace. Requests in the named namespace pass authorization (404 for an object that does not
// exist); the same requests elsewhere get 403; the release namespace cannot get a Pod created.
// Each namespace's SelfSubjectRulesReview is compared with a checked-in expectation.
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { renderText, type ChartFeature } from '../chart/helm.js';
import { createTestNamespace, loadKubeConfig, type TestNamespace } from '../helpers/kube.js';
import { kubeConfigForToken, rulesOf, statusAs, websocketHeaders } from './real-token.js';

const execFileAsync = promisify(execFile);
const EXECUTOR_SA = 'kubexa-agent-executor';
const ALL_FEATURES: readonly ChartFeature[] = ['exec', 'nodeShell', 'nodeOps', 'write'];
const EXPECTED_FILE = join(import.meta.dirname, 'expected-rules-scoped.json');
const PINNED_IMAGE = `registry.example.com/tools/nsenter@sha256:${'d'.repeat(64)}`;

describe('executor RBAC scoped to the policy, with its real token on a real API server', () => {
  const admin = loadKubeConfig(inject('kubeconfigPath'));
  const binDir = inject('clusterBinDir');
  const namespaces: Record<'release' | 'allowed' | 'other' | 'helpers', TestNamespace | undefined> =
    { release: undefined, allowed: undefined, other: undefined, helpers: undefined };
  let workdir = '';
  let executor: KubeConfig | undefined;

  const ns = (which: keyof typeof namespaces) => namespaces[which]?.name ?? '';

  beforeAll(async () => {
    namespaces.release = await createTestNamespace(admin, 'kubexa-scope');
    namespaces.allowed = await createTestNamespace(admin, 'kubexa-scope-team');
    namespaces.other = await createTestNamespace(admin, 'kubexa-scope-other');
    namespaces.helpers = await createTestNamespace(admin, 'kubexa-scope-shells');
    workdir = await mkdtemp(join(tmpdir(), 'kubexa-scope-'));
    const manifest = await renderText(join(binDir, 'helm'), {
      release: 'kubexa-agent',
      namespace: ns('release'),
      implementedFeatures: ALL_FEATURES,
      values: {
        rbac: { exec: true, nodeShell: true, nodeOps: true, write: true },
        persistence: { enabled: false },
        exec: {
          pod: { rules: [{ namespace: ns('allowed') }] },
          node: { namespace: ns('helpers'), image: PINNED_IMAGE },
        },
        mutate: {
          rules: [{ namespace: ns('allowed'), resources: ['deployments'], verbs: ['scale'] }],
        },
      },
    });
    const path = join(workdir, 'chart.yaml');
    await writeFile(path, manifest);
    await execFileAsync(join(binDir, 'kubectl'), [
      '--kubeconfig',
      inject('kubeconfigPath'),
      'apply',
      '-f',
      path,
    ]);
    // The executor's own ServiceAccount token, as the kubelet would project it.
    const token = await admin.makeApiClient(CoreV1Api).createNamespacedServiceAccountToken({
      name: EXECUTOR_SA,
      namespace: ns('release'),
      body: { spec: { audiences: [], expirationSeconds: 600 } },
    });
    executor = kubeConfigForToken(admin, token.status?.token ?? '');
  });

  afterAll(async () => {
    for (const namespace of Object.values(namespaces)) await namespace?.delete();
    if (workdir !== '') await rm(workdir, { recursive: true, force: true });
    // The release's cluster-scoped objects carry its namespace in their names.
    const release = ns('release');
    if (release === '') return;
    await execFileAsync(join(binDir, 'kubectl'), [
      '--kubeconfig',
      inject('kubeconfigPath'),
      'delete',
      'clusterrole,clusterrolebinding',
      `${release}:kubexa-agent`,
      `${release}:kubexa-agent-executor`,
      '--ignore-not-found',
    ]);
  });

  /** The statuses of the same requests in each namespace, as the executor. */
  async function statuses(namespace: string): Promise<Record<string, number>> {
    if (executor === undefined) throw new Error('beforeAll did not run');
    const as = executor;
    const entries: [string, Promise<number>][] = [
      [
        'WebSocket exec',
        statusAs(
          as,
          'GET',
          `/api/v1/namespaces/${namespace}/pods/absent/exec?command=sh&stdout=true`,
          {
            headers: websocketHeaders(),
          },
        ),
      ],
      [
        'scale a deployment',
        statusAs(as, 'PATCH', `/apis/apps/v1/namespaces/${namespace}/deployments/absent/scale`, {
          body: { spec: { replicas: 1 } },
          headers: { 'content-type': 'application/merge-patch+json' },
        }),
      ],
      [
        'create a Pod',
        statusAs(as, 'POST', `/api/v1/namespaces/${namespace}/pods`, {
          body: { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'x' }, spec: {} },
        }),
      ],
      ['delete a Pod', statusAs(as, 'DELETE', `/api/v1/namespaces/${namespace}/pods/absent`)],
      ['read Secrets', statusAs(as, 'GET', `/api/v1/namespaces/${namespace}/secrets`)],
    ];
    const results = await Promise.all(entries.map(async ([name, s]) => [name, await s] as const));
    return Object.fromEntries(results);
  }

  it('pod consoles and writes pass authorization only in the namespace the rules name', async () => {
    // 404: authorized, the object is absent. 422: authorized, the Pod spec is empty.
    expect(await statuses(ns('allowed'))).toEqual({
      'WebSocket exec': 404,
      'scale a deployment': 404,
      'create a Pod': 422,
      'delete a Pod': 404,
      'read Secrets': 403,
    });
    expect(await statuses(ns('other'))).toEqual({
      'WebSocket exec': 403,
      'scale a deployment': 403,
      'create a Pod': 403,
      'delete a Pod': 403,
      'read Secrets': 403,
    });
  });

  it('node-console helpers are created in their own namespace; the release namespace only sweeps', async () => {
    expect(await statuses(ns('helpers'))).toMatchObject({
      'WebSocket exec': 404,
      'create a Pod': 422,
      'delete a Pod': 404,
    });
    expect(await statuses(ns('release'))).toEqual({
      'WebSocket exec': 403,
      'scale a deployment': 403,
      'create a Pod': 403,
      'delete a Pod': 404,
      'read Secrets': 403,
    });
  });

  it('scoped writes reach no cluster-scoped object; node jobs stay cluster-wide', async () => {
    if (executor === undefined) throw new Error('beforeAll did not run');
    const results = await Promise.all([
      statusAs(executor, 'POST', '/apis/rbac.authorization.k8s.io/v1/clusterroles', {
        body: { metadata: { name: 'x' }, rules: [] },
      }),
      statusAs(executor, 'DELETE', '/apis/storage.k8s.io/v1/storageclasses/absent'),
      statusAs(executor, 'DELETE', '/api/v1/persistentvolumes/absent'),
      statusAs(executor, 'PATCH', '/api/v1/nodes/absent-node', {
        body: { spec: { unschedulable: true } },
        headers: { 'content-type': 'application/merge-patch+json' },
      }),
      statusAs(executor, 'GET', '/api/v1/nodes/kwok-node-0/proxy/pods'),
    ]);
    expect(results).toEqual([403, 403, 403, 404, 403]);
  });

  it('holds exactly the checked-in rules in each namespace (SelfSubjectRulesReview)', async () => {
    if (executor === undefined) throw new Error('beforeAll did not run');
    const as = executor;
    const actual = Object.fromEntries(
      await Promise.all(
        (['release', 'allowed', 'other', 'helpers'] as const).map(
          async (which) => [which, await rulesOf(as, ns(which))] as const,
        ),
      ),
    );
    // KUBEXA_UPDATE_EXPECTED_RULES=1 rewrites the file from what the API server says; review
    // the diff before committing it.
    if (process.env['KUBEXA_UPDATE_EXPECTED_RULES'] === '1') {
      await writeFile(EXPECTED_FILE, `${JSON.stringify(actual, null, 2)}\n`);
    }
    const expected = JSON.parse(await readFile(EXPECTED_FILE, 'utf8')) as Record<string, string[]>;
    const diff = (a: readonly string[] = [], b: readonly string[] = []) =>
      a.filter((x) => !b.includes(x));
    const report = Object.fromEntries(
      Object.keys({ ...expected, ...actual }).map((key) => [
        key,
        { extra: diff(actual[key], expected[key]), missing: diff(expected[key], actual[key]) },
      ]),
    );
    expect(report).toEqual(
      Object.fromEntries(Object.keys(report).map((key) => [key, { extra: [], missing: [] }])),
    );
  });
});
