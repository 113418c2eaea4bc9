// The two identities with their REAL tokens against the real API server: the chart (rbac.exec
// with no exec.pod.rules: the executor is rendered and granted nothing) is applied into a namespace, kwok runs its Pod, the
// executor's token is the Pod's ServiceAccount token, and the executor mints the collector's
// token with TokenRequest exactly as executor/identity/token-minter.ts does in the Pod: bound to
// a Secret the Pod owns, which the chart's ValidatingAdmissionPolicy lets it create and nothing
// else.
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { lstat, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { ApiException, AuthenticationV1Api, CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { systemClock } from '../../shared/clock.js';
import {
  createTokenMinter,
  mintCollectorToken,
  writeFileAtomically,
} from '../../executor/identity/token-minter.js';
import { selfSubjectReviewProbe } from '../../executor/identity/token-liveness.js';
import { QueryVerb } from '../../proto/index.js';
import {
  bindingSecretName,
  ensureBindingSecret,
  type BindingSecret,
} from '../../executor/identity/token-binding.js';
import { renderText } from '../chart/helm.js';
import { RENDER_UNIMPLEMENTED } from '../chart/rbac-expectations.js';
import { kubeConfigForToken, rulesOf, statusAs, websocketHeaders } from './real-token.js';
import {
  createTestNamespace,
  eventually,
  loadKubeConfig,
  type TestNamespace,
} from '../helpers/kube.js';
import { captureLogs } from '../helpers/gateway-harness.js';
import { startQueryAgent } from '../helpers/query-agent.js';

const execFileAsync = promisify(execFile);
const COLLECTOR_SA = 'kubexa-agent';
const EXECUTOR_SA = 'kubexa-agent-executor';
const EXPECTED_RULES_FILE = join(import.meta.dirname, 'expected-rules.json');
const randomUid = () => randomUUID();

function restoreEnv(name: string, value: string | undefined): void {
  if (value === undefined) Reflect.deleteProperty(process.env, name);
  else process.env[name] = value;
}

describe('identities with their real tokens on a real API server', () => {
  const admin = loadKubeConfig(inject('kubeconfigPath'));
  const binDir = inject('clusterBinDir');
  const core = admin.makeApiClient(CoreV1Api);
  let ns: TestNamespace | undefined;
  let workdir = '';
  let podName = '';
  let podUid = '';
  let binding: BindingSecret = { name: '' };
  let executor: KubeConfig | undefined;
  let collector: KubeConfig | undefined;
  let collectorToken = '';

  const namespace = () => ns?.name ?? '';

  async function review(token: string) {
    const answer = await admin.makeApiClient(AuthenticationV1Api).createTokenReview({
      body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenReview', spec: { token } },
    });
    return answer.status;
  }

  beforeAll(async () => {
    ns = await createTestNamespace(admin, 'kubexa-sec');
    workdir = await mkdtemp(join(tmpdir(), 'kubexa-sec-'));
    const manifest = await renderText(join(binDir, 'helm'), {
      release: 'kubexa-agent',
      namespace: namespace(),
      values: {
        // A gate that renders the executor and grants nothing else: rbac.exec with no
        // exec.pod.rules scopes pods/exec to no namespace (test/integration/rbac.test.ts checks
        // the grants each gate gives).
        rbac: { exec: true },
        persistence: { enabled: false },
        ...RENDER_UNIMPLEMENTED,
      },
    });
    const path = join(workdir, 'chart.yaml');
    await writeFile(path, manifest);
    await execFileAsync(join(binDir, 'kubectl'), [
      '--kubeconfig',
      inject('kubeconfigPath'),
      'apply',
      '--namespace',
      namespace(),
      '-f',
      path,
    ]);
    const pod = await eventually(
      'the agent Pod',
      async () => {
        const pods = await core.listNamespacedPod({ namespace: namespace() });
        return pods.items.find((p) => p.metadata?.uid !== undefined);
      },
      { timeoutMs: 60_000 },
    );
    podName = pod.metadata?.name ?? '';
    podUid = pod.metadata?.uid ?? '';
    expect(pod.spec?.serviceAccountName).toBe(EXECUTOR_SA);
    // The executor's token is what the kubelet projects: the Pod's ServiceAccount, bound to it.
    const executorToken = await core.createNamespacedServiceAccountToken({
      name: EXECUTOR_SA,
      namespace: namespace(),
      body: {
        spec: {
          audiences: [],
          expirationSeconds: 3607,
          boundObjectRef: { apiVersion: 'v1', kind: 'Pod', name: podName, uid: podUid },
        },
      },
    });
    executor = kubeConfigForToken(admin, executorToken.status?.token ?? '');
    // The executor creates the binding Secret and mints the collector's token with ITS OWN
    // credentials (the chart's policy is admitted by now: the apply above created it first).
    const executorCore = executor.makeApiClient(CoreV1Api);
    binding = await eventually(
      'the executor to create its binding Secret',
      () =>
        ensureBindingSecret(executorCore, { namespace: namespace(), podName, podUid }).catch(
          () => undefined,
        ),
      { timeoutMs: 30_000 },
    );
    const minted = await mintCollectorToken(executorCore, {
      serviceAccount: COLLECTOR_SA,
      namespace: namespace(),
      binding,
    });
    collectorToken = minted.token;
    collector = kubeConfigForToken(admin, collectorToken);
  });

  afterAll(async () => {
    await ns?.delete();
    if (workdir !== '') await rm(workdir, { recursive: true, force: true });
  });

  it('no Secret of type service-account-token exists in the release namespace', async () => {
    const secrets = await core.listNamespacedSecret({ namespace: namespace() });
    expect(secrets.items.filter((s) => s.type === 'kubernetes.io/service-account-token')).toEqual(
      [],
    );
  });

  it("the minted token is the collector's, bound to the Pod's binding Secret, for 10 minutes", async () => {
    const status = await review(collectorToken);
    expect(status?.authenticated).toBe(true);
    expect(status?.user?.username).toBe(`system:serviceaccount:${namespace()}:${COLLECTOR_SA}`);
    const payload = JSON.parse(
      Buffer.from(collectorToken.split('.')[1] ?? '', 'base64url').toString('utf8'),
    ) as { exp: number; iat: number; 'kubernetes.io': { secret?: { name: string; uid: string } } };
    const secret = await core.readNamespacedSecret({
      name: bindingSecretName(podName),
      namespace: namespace(),
    });
    expect({
      boundTo: payload['kubernetes.io'].secret,
      lifetime: payload.exp - payload.iat <= 600,
    }).toEqual({
      boundTo: { name: `${podName}-token-binding`, uid: secret.metadata?.uid },
      lifetime: true,
    });
  });

  it('the binding Secret is empty, Opaque, and owned by the Pod (the garbage collector deletes it with the Pod)', async () => {
    const secret = await core.readNamespacedSecret({
      name: bindingSecretName(podName),
      namespace: namespace(),
    });
    expect({
      type: secret.type,
      data: secret.data,
      owners: secret.metadata?.ownerReferences?.map((o) => [o.kind, o.name, o.uid]),
    }).toEqual({ type: 'Opaque', data: undefined, owners: [['Pod', podName, podUid]] });
  });

  it('the admission policy lets the executor create its binding Secret and no other', async () => {
    if (executor === undefined) throw new Error('beforeAll did not run');
    const asExecutor = executor;
    const create = (as: KubeConfig, body: Record<string, unknown>) =>
      statusAs(as, 'POST', `/api/v1/namespaces/${namespace()}/secrets`, {
        body: { apiVersion: 'v1', kind: 'Secret', ...body },
      });
    const own = { apiVersion: 'v1', kind: 'Pod', name: podName, uid: podUid };
    const named = (name: string, extra: Record<string, unknown> = {}) => ({
      name,
      ownerReferences: [own],
      ...extra,
    });
    const bindingName = bindingSecretName(podName);
    // An executor token that names no Pod (minted by an admin): no Secret at all.
    const unbound = await core.createNamespacedServiceAccountToken({
      name: EXECUTOR_SA,
      namespace: namespace(),
      body: { spec: { audiences: [], expirationSeconds: 600 } },
    });
    const unboundExecutor = kubeConfigForToken(admin, unbound.status?.token ?? '');
    // The API server enforces a new policy once its admission informer has it (seconds under
    // load): wait until a forbidden dry-run create is refused, so no case below races it.
    await eventually(
      'the token-binding admission policy to be enforced',
      async () => {
        const status = await statusAs(
          asExecutor,
          'POST',
          `/api/v1/namespaces/${namespace()}/secrets?dryRun=All`,
          {
            body: {
              apiVersion: 'v1',
              kind: 'Secret',
              type: 'Opaque',
              metadata: named(`${podName}-probe`),
            },
          },
        );
        return status === 403 ? true : undefined;
      },
      { timeoutMs: 60_000 },
    );
    const cases: [string, Promise<number>][] = [
      [
        'a token Secret for the executor',
        create(executor, {
          type: 'kubernetes.io/service-account-token',
          metadata: named('planted', {
            annotations: { 'kubernetes.io/service-account.name': EXECUTOR_SA },
          }),
        }),
      ],
      [
        'the binding name as a token Secret',
        create(executor, {
          type: 'kubernetes.io/service-account-token',
          metadata: named(bindingName, {
            annotations: { 'kubernetes.io/service-account.name': COLLECTOR_SA },
          }),
        }),
      ],
      ['another name', create(executor, { type: 'Opaque', metadata: named(`${podName}-other`) })],
      [
        'data in it',
        create(executor, { type: 'Opaque', metadata: named(bindingName), data: { a: 'YQ==' } }),
      ],
      ['no owner', create(executor, { type: 'Opaque', metadata: { name: bindingName } })],
      [
        'another owner',
        create(executor, {
          type: 'Opaque',
          metadata: { name: bindingName, ownerReferences: [{ ...own, uid: randomUid() }] },
        }),
      ],
      [
        'a second owner',
        create(executor, {
          type: 'Opaque',
          metadata: {
            name: bindingName,
            ownerReferences: [own, { ...own, name: 'other', uid: randomUid() }],
          },
        }),
      ],
      [
        'a token bound to no Pod',
        create(unboundExecutor, { type: 'Opaque', metadata: named(bindingName) }),
      ],
      // The executor may create, nothing else: it cannot read or delete its own binding Secret.
      [
        'get',
        statusAs(executor, 'GET', `/api/v1/namespaces/${namespace()}/secrets/${bindingName}`),
      ],
      [
        'delete',
        statusAs(executor, 'DELETE', `/api/v1/namespaces/${namespace()}/secrets/${bindingName}`),
      ],
    ];
    const results = await Promise.all(cases.map(async ([name, status]) => [name, await status]));
    expect(Object.fromEntries(results)).toEqual(
      Object.fromEntries(cases.map(([name]) => [name, 403])),
    );
  });

  it('the API server refuses to bind the collector token to a Pod that runs as the executor', async () => {
    if (executor === undefined) throw new Error('beforeAll did not run');
    const err = await executor
      .makeApiClient(CoreV1Api)
      .createNamespacedServiceAccountToken({
        name: COLLECTOR_SA,
        namespace: namespace(),
        body: {
          spec: {
            audiences: [],
            boundObjectRef: { apiVersion: 'v1', kind: 'Pod', name: podName, uid: podUid },
          },
        },
      })
      .catch((e: unknown) => e);
    expect((err as ApiException<string>).body).toContain('different serviceaccount name');
  });

  it("the executor may mint the collector's token and nobody else's", async () => {
    if (executor === undefined) throw new Error('beforeAll did not run');
    const api = executor.makeApiClient(CoreV1Api);
    for (const name of [EXECUTOR_SA, 'default']) {
      const err = await mintCollectorToken(api, {
        serviceAccount: name,
        namespace: namespace(),
        binding,
      }).catch((e: unknown) => e);
      expect(err, name).toBeInstanceOf(ApiException);
      expect((err as ApiException<unknown>).code, name).toBe(403);
    }
  });

  it('the raw requests below authenticate as the token (not anonymously): the collector lists pods', async () => {
    if (collector === undefined) throw new Error('beforeAll did not run');
    expect(await statusAs(collector, 'GET', `/api/v1/namespaces/${namespace()}/pods`)).toBe(200);
  });

  it('the collector cannot exec (WebSocket), evict, reach the node proxy, or take another token', async () => {
    if (collector === undefined) throw new Error('beforeAll did not run');
    const ns0 = namespace();
    const checks: [string, Promise<number>][] = [
      [
        'WebSocket exec',
        statusAs(
          collector,
          'GET',
          `/api/v1/namespaces/${ns0}/pods/${podName}/exec?command=sh&stdin=true&stdout=true&tty=true`,
          { headers: websocketHeaders() },
        ),
      ],
      [
        'eviction',
        statusAs(collector, 'POST', `/api/v1/namespaces/${ns0}/pods/${podName}/eviction`, {
          body: {
            apiVersion: 'policy/v1',
            kind: 'Eviction',
            metadata: { name: podName, namespace: ns0 },
          },
        }),
      ],
      ['node proxy', statusAs(collector, 'GET', '/api/v1/nodes/kwok-node-0/proxy/pods')],
      [
        "the executor's token",
        statusAs(
          collector,
          'POST',
          `/api/v1/namespaces/${ns0}/serviceaccounts/${EXECUTOR_SA}/token`,
          {
            body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: {} },
          },
        ),
      ],
      ['Secrets in its namespace', statusAs(collector, 'GET', `/api/v1/namespaces/${ns0}/secrets`)],
      [
        'creating a Pod',
        statusAs(collector, 'POST', `/api/v1/namespaces/${ns0}/pods`, { body: {} }),
      ],
    ];
    const results = await Promise.all(checks.map(async ([name, status]) => [name, await status]));
    expect(Object.fromEntries(results)).toEqual(
      Object.fromEntries(checks.map(([name]) => [name, 403])),
    );
  });

  it('the executor, with rbac.exec and no exec.pod.rules, cannot exec, evict or reach the node proxy either', async () => {
    if (executor === undefined) throw new Error('beforeAll did not run');
    const ns0 = namespace();
    const results = await Promise.all([
      statusAs(
        executor,
        'GET',
        `/api/v1/namespaces/${ns0}/pods/${podName}/exec?command=sh&stdout=true`,
        { headers: websocketHeaders() },
      ),
      statusAs(executor, 'POST', `/api/v1/namespaces/${ns0}/pods/${podName}/eviction`, {
        body: {
          apiVersion: 'policy/v1',
          kind: 'Eviction',
          metadata: { name: podName, namespace: ns0 },
        },
      }),
      statusAs(executor, 'GET', '/api/v1/nodes/kwok-node-0/proxy/pods'),
      statusAs(executor, 'GET', `/api/v1/namespaces/${ns0}/secrets`),
    ]);
    expect(results).toEqual([403, 403, 403, 403]);
  });

  it('each identity holds exactly the rules checked in (SelfSubjectRulesReview)', async () => {
    if (executor === undefined || collector === undefined) throw new Error('beforeAll did not run');
    const actual = {
      collector: await rulesOf(collector, namespace()),
      executor: await rulesOf(executor, namespace()),
    };
    // The collector's ServiceAccount name is fixed; the namespace part is not in the rules.
    // KUBEXA_UPDATE_EXPECTED_RULES=1 rewrites the file from what the API server says; review
    // the diff before committing it.
    if (process.env['KUBEXA_UPDATE_EXPECTED_RULES'] === '1') {
      await writeFile(EXPECTED_RULES_FILE, `${JSON.stringify(actual, null, 2)}\n`);
    }
    const expected = JSON.parse(await readFile(EXPECTED_RULES_FILE, 'utf8')) as typeof actual;
    const diff = (a: string[], b: string[]) => a.filter((x) => !b.includes(x));
    expect({
      collectorExtra: diff(actual.collector, expected.collector),
      collectorMissing: diff(expected.collector, actual.collector),
      executorExtra: diff(actual.executor, expected.executor),
      executorMissing: diff(expected.executor, actual.executor),
    }).toEqual({
      collectorExtra: [],
      collectorMissing: [],
      executorExtra: [],
      executorMissing: [],
    });
  });

  it('the minter writes the token for the collector only (0440, shared group), atomically, and it authenticates', async () => {
    if (executor === undefined) throw new Error('beforeAll did not run');
    const dir = await mkdtemp(join(tmpdir(), 'kubexa-minted-'));
    const minterLog = captureLogs('trace');
    const minter = createTokenMinter(
      {
        serviceAccount: COLLECTOR_SA,
        namespace: namespace(),
        podName,
        podUid,
        tokenDir: dir,
        readerGroup: 4343,
        caCert: 'ca',
      },
      {
        core: executor.makeApiClient(CoreV1Api),
        clock: systemClock,
        logger: minterLog.logger,
      },
    );
    try {
      await minter.start(new AbortController().signal);
      for (const name of ['token', 'ca.crt', 'namespace']) {
        const stats = await lstat(join(dir, name));
        expect(stats.mode & 0o777, name).toBe(0o440);
        expect(stats.gid, name).toBe(4343);
      }
      const token = await readFile(join(dir, 'token'), 'utf8');
      expect((await review(token))?.user?.username).toBe(
        `system:serviceaccount:${namespace()}:${COLLECTOR_SA}`,
      );
      // The token passes through the executor's minter: its log at trace never holds it.
      const log = minterLog.raw.join('');
      expect(log).toContain('collector token minted');
      expect(log.includes(token)).toBe(false);
      expect(log.includes(token.split('.')[2] ?? '-')).toBe(false);
    } finally {
      await minter.close();
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("a token Secret someone creates for the executor is filled by the API server, and out of the collector's reach", async () => {
    if (collector === undefined) throw new Error('beforeAll did not run');
    // The threat model's namespace-editor rule: whoever may create Secrets in the release
    // namespace can get a long-lived executor token this way. The collector must not read it.
    const name = 'planted-executor-token';
    await core.createNamespacedSecret({
      namespace: namespace(),
      body: {
        metadata: { name, annotations: { 'kubernetes.io/service-account.name': EXECUTOR_SA } },
        type: 'kubernetes.io/service-account-token',
      },
    });
    try {
      const filled = await eventually(
        'the token controller to fill the Secret',
        async () =>
          (await core.readNamespacedSecret({ name, namespace: namespace() })).data?.['token'],
        { timeoutMs: 30_000 },
      );
      const token = Buffer.from(filled, 'base64').toString('utf8');
      expect((await review(token))?.user?.username).toBe(
        `system:serviceaccount:${namespace()}:${EXECUTOR_SA}`,
      );
      expect(
        await statusAs(collector, 'GET', `/api/v1/namespaces/${namespace()}/secrets/${name}`),
      ).toBe(403);
    } finally {
      await core.deleteNamespacedSecret({ name, namespace: namespace() });
    }
  });

  it('the minter creates the binding Secret again when it is deleted, and binds new tokens to the new one', async () => {
    if (executor === undefined) throw new Error('beforeAll did not run');
    const dir = await mkdtemp(join(tmpdir(), 'kubexa-minted-'));
    // A clock whose sleeps last at most 200 ms: the minter refreshes (and retries) at once.
    const hurried = {
      now: () => Date.now(),
      sleep: (ms: number, signal: AbortSignal) => systemClock.sleep(Math.min(ms, 200), signal),
    };
    const minter = createTokenMinter(
      {
        serviceAccount: COLLECTOR_SA,
        namespace: namespace(),
        podName,
        podUid,
        tokenDir: dir,
        caCert: 'ca',
      },
      {
        core: executor.makeApiClient(CoreV1Api),
        clock: hurried,
        logger: pino({ level: 'silent' }),
      },
    );
    const name = bindingSecretName(podName);
    const uidNow = async () =>
      (await core.readNamespacedSecret({ name, namespace: namespace() })).metadata?.uid;
    const boundUid = async () => {
      const token = await readFile(join(dir, 'token'), 'utf8').catch(() => '');
      const claims = JSON.parse(
        Buffer.from(token.split('.')[1] ?? 'e30', 'base64url').toString('utf8'),
      ) as { 'kubernetes.io'?: { secret?: { uid: string } } };
      return claims['kubernetes.io']?.secret?.uid;
    };
    try {
      await minter.start(new AbortController().signal);
      const before = await uidNow();
      await core.deleteNamespacedSecret({ name, namespace: namespace() });
      const recreated = await eventually(
        'a new binding Secret, and a token bound to it',
        async () => {
          const uid = await uidNow().catch(() => undefined);
          return uid !== undefined && uid !== before && (await boundUid()) === uid
            ? uid
            : undefined;
        },
        { timeoutMs: 30_000, intervalMs: 250 },
      );
      expect(recreated).not.toBe(before);
    } finally {
      await minter.close();
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('a minted token refused before its refresh (binding Secret deleted) is replaced at the next liveness check, not at the refresh', async () => {
    if (executor === undefined) throw new Error('beforeAll did not run');
    // The probe as the executor builds it: the executor's kubeconfig for the server and its CA,
    // nothing but the token under test as the credential.
    const probe = selfSubjectReviewProbe(executor);
    const dir = await mkdtemp(join(tmpdir(), 'kubexa-liveness-'));
    // The real clock: the refresh is 8 minutes away, so only the liveness check can replace the
    // token within this test's wait.
    const minter = createTokenMinter(
      {
        serviceAccount: COLLECTOR_SA,
        namespace: namespace(),
        podName,
        podUid,
        tokenDir: dir,
        caCert: 'ca',
        livenessCheckMs: 1_000,
      },
      {
        core: executor.makeApiClient(CoreV1Api),
        clock: systemClock,
        logger: pino({ level: 'silent' }),
        liveness: probe,
      },
    );
    const fileToken = () => readFile(join(dir, 'token'), 'utf8');
    try {
      const stop = new AbortController();
      expect(await probe.check('not-a-token', stop.signal)).toBe('refused');
      await minter.start(stop.signal);
      const first = await fileToken();
      expect(await probe.check(first, stop.signal)).toBe('alive');
      await core.deleteNamespacedSecret({
        name: bindingSecretName(podName),
        namespace: namespace(),
      });
      await eventually(
        'the API server to refuse the first token',
        async () => ((await review(first))?.authenticated === true ? undefined : true),
        { timeoutMs: 30_000, intervalMs: 250 },
      );
      const replaced = await eventually(
        'a new token in the file, accepted by the API server',
        async () => {
          const token = await fileToken();
          return token !== first && (await review(token))?.authenticated === true
            ? token
            : undefined;
        },
        { timeoutMs: 60_000, intervalMs: 250 },
      );
      const collectorNow = kubeConfigForToken(admin, replaced);
      expect(
        await statusAs(collectorNow, 'GET', `/api/v1/namespaces/${namespace()}/pods?limit=1`),
      ).toBe(200);
    } finally {
      await minter.close();
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('the running collector keeps authenticating after its token file is replaced and the old token dies', async () => {
    if (executor === undefined) throw new Error('beforeAll did not run');
    const executorCore = executor.makeApiClient(CoreV1Api);
    const cluster = admin.getCurrentCluster();
    if (cluster === null) throw new Error('kubeconfig has no current cluster');
    const server = new URL(cluster.server);
    const caCert =
      cluster.caData !== undefined
        ? Buffer.from(cluster.caData, 'base64').toString('utf8')
        : await readFile(cluster.caFile ?? '', 'utf8');
    // Two throwaway Secrets to bind the two tokens to (the executor may mint for them: the API
    // server reads the bound object itself). Deleting the first kills the first token within
    // seconds: a TokenRequest cannot live under 10 minutes, so that is how a short life is made.
    const bindings = ['rotation-a', 'rotation-b'];
    for (const name of bindings) {
      await core.createNamespacedSecret({ namespace: namespace(), body: { metadata: { name } } });
    }
    const uidOf = async (name: string) =>
      (await core.readNamespacedSecret({ name, namespace: namespace() })).metadata?.uid;
    const mint = async (name: string) =>
      mintCollectorToken(executorCore, {
        serviceAccount: COLLECTOR_SA,
        namespace: namespace(),
        binding: { name, ...(await uidOf(name).then((uid) => (uid === undefined ? {} : { uid }))) },
      });
    // The in-cluster layout under a prefix: the collector's main.ts calls loadFromCluster(), the
    // same code with no prefix; the minter's own atomic write replaces the file.
    const prefix = await mkdtemp(join(tmpdir(), 'kubexa-rotation-'));
    const tokenDir = join(prefix, 'var/run/secrets/kubernetes.io/serviceaccount');
    await mkdir(tokenDir, { recursive: true });
    await writeFile(join(tokenDir, 'ca.crt'), caCert);
    await writeFile(join(tokenDir, 'namespace'), namespace());
    const first = await mint('rotation-a');
    await writeFileAtomically(tokenDir, 'token', first.token, undefined);
    const env = {
      host: process.env['KUBERNETES_SERVICE_HOST'],
      port: process.env['KUBERNETES_SERVICE_PORT'],
    };
    const inCluster = new KubeConfig();
    try {
      process.env['KUBERNETES_SERVICE_HOST'] = server.hostname;
      process.env['KUBERNETES_SERVICE_PORT'] = server.port;
      inCluster.loadFromCluster(prefix);
    } finally {
      restoreEnv('KUBERNETES_SERVICE_HOST', env.host);
      restoreEnv('KUBERNETES_SERVICE_PORT', env.port);
    }
    const pods = { group: '', version: 'v1', resource: 'pods' };
    await using agent = await startQueryAgent(
      inCluster,
      `collect: {state: {enabled: false}}\nquery: {rules: [{resources: [pods], namespace: "${namespace()}"}]}\n`,
    );
    const list = () =>
      agent.ask({ ref: pods, verb: QueryVerb.QUERY_VERB_LIST, namespace: namespace() });
    expect((await list()).error).toBeUndefined();

    const second = await mint('rotation-b');
    await writeFileAtomically(tokenDir, 'token', second.token, undefined);
    await core.deleteNamespacedSecret({ name: 'rotation-a', namespace: namespace() });
    await eventually(
      'the API server to refuse the first token',
      async () => ((await review(first.token))?.authenticated === true ? undefined : true),
      { timeoutMs: 30_000, intervalMs: 500 },
    );
    // client-node's in-cluster config (FileAuth) reads the file again once 60 s have passed
    // since it last did; the minter replaces it two minutes before the old token expires. The
    // promise is that it recovers without a restart; how soon is a figure, not an assertion.
    const failures: string[] = [];
    await eventually(
      'the running collector to authenticate with the new token',
      async () => {
        const answer = await list();
        if (answer.error !== undefined) failures.push(answer.error.message);
        return answer.error === undefined || undefined;
      },
      { timeoutMs: 90_000, intervalMs: 1_000 },
    ).catch((err: unknown) => {
      throw new Error(`${String(err)}; last answers: ${failures.slice(-2).join(' | ')}`);
    });
    expect((await review(second.token))?.authenticated).toBe(true);
    await core.deleteNamespacedSecret({ name: 'rotation-b', namespace: namespace() });
    await rm(prefix, { recursive: true, force: true });
  });

  // Last: it deletes the Pod the tokens above are bound to.
  it("the collector's minted token is refused within seconds once its Pod is gone", async () => {
    if (executor === undefined) throw new Error('beforeAll did not run');
    // Minted now: the binding Secret may have been replaced since beforeAll (the test above).
    const collectorToken = (
      await mintCollectorToken(executor.makeApiClient(CoreV1Api), {
        serviceAccount: COLLECTOR_SA,
        namespace: namespace(),
        binding: { name: bindingSecretName(podName) },
      })
    ).token;
    expect((await review(collectorToken))?.authenticated).toBe(true);
    await core.deleteNamespacedPod({ name: podName, namespace: namespace() });
    await eventually(
      'the garbage collector to delete the binding Secret with the Pod',
      () =>
        core
          .readNamespacedSecret({ name: bindingSecretName(podName), namespace: namespace() })
          .then(() => undefined)
          .catch(() => true),
      { timeoutMs: 60_000, intervalMs: 500 },
    );
    const refused = await eventually(
      'the API server to refuse the token',
      async () => ((await review(collectorToken))?.authenticated === true ? undefined : true),
      { timeoutMs: 30_000, intervalMs: 500 },
    );
    expect(refused).toBe(true);
  });
});
