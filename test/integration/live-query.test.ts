// The live query end to end against the real API server: the demo gateway sends ResourceQuery
// messages on the stream, the collector's gateway session answers them through the policy gate.
// Every "refused without an API call" is asserted from a proxy in front of the API server (the
// bytes clients sent it), never from the agent's own counters.
import { request as httpsRequest, type RequestOptions } from 'node:https';
import {
  ApiextensionsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  RbacAuthorizationV1Api,
} from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createKubeRest } from '../../collector/query/kube-rest.js';
import { QueryErrorCode, type ResourceQueryResult } from '../../proto/index.js';
import { startCountingProxy, type CountingProxy } from '../helpers/counting-proxy.js';
import { startRecordingProxy } from '../helpers/recording-proxy.js';
import {
  createTestNamespace,
  eventually,
  loadKubeConfig,
  type TestNamespace,
} from '../helpers/kube.js';
import { FULL, GET, LIST, payloadJson, startQueryAgent, TABLE } from '../helpers/query-agent.js';

const CONFIGMAPS = { group: '', version: 'v1', resource: 'configmaps' };
const SECRETS = { group: '', version: 'v1', resource: 'secrets' };
const LAST_APPLIED = 'kubectl.kubernetes.io/last-applied-configuration';

let kc: KubeConfig;
let core: CoreV1Api;
let proxy: CountingProxy;
let nsA: TestNamespace;
let nsB: TestNamespace;
const namespaces: TestNamespace[] = [];

const code = (result: ResourceQueryResult) => result.error?.code;

function names(result: ResourceQueryResult): string[] {
  expect(result.error).toBeUndefined();
  const payload = payloadJson(result) as
    | { metadata: { name: string } }[]
    | { kind: 'Table'; rows: { object: { metadata: { name: string } } }[] };
  const objects = Array.isArray(payload) ? payload : payload.rows.map((row) => row.object);
  return objects.map((object) => object.metadata.name).sort();
}

async function newNamespace(prefix: string): Promise<TestNamespace> {
  const ns = await createTestNamespace(kc, prefix);
  namespaces.push(ns);
  return ns;
}

/** The agent's config: the query section as given, everything else defaulted. */
const config = (query: string) => `collect: {state: {enabled: false}}\nquery: ${query}\n`;

beforeAll(async () => {
  kc = loadKubeConfig(inject('kubeconfigPath'));
  core = kc.makeApiClient(CoreV1Api);
  proxy = await startCountingProxy(kc);
  nsA = await newNamespace('query-a');
  nsB = await newNamespace('query-b');
  const configMap = (name: string, labels: Record<string, string>) => ({
    metadata: { name, labels },
    data: { key: name },
  });
  await core.createNamespacedConfigMap({
    namespace: nsA.name,
    body: configMap('web-1', { tier: 'web', app: 'shop' }),
  });
  await core.createNamespacedConfigMap({
    namespace: nsA.name,
    body: configMap('web-2', { tier: 'web', app: 'blog' }),
  });
  await core.createNamespacedConfigMap({
    namespace: nsA.name,
    body: configMap('db-1', { tier: 'db', app: 'shop' }),
  });
  await core.createNamespacedConfigMap({
    namespace: nsB.name,
    body: configMap('other-1', { tier: 'web', app: 'shop' }),
  });
  // As kubectl apply writes it: the annotation is a second copy of the values.
  await core.createNamespacedSecret({
    namespace: nsA.name,
    body: {
      metadata: {
        name: 'creds',
        annotations: {
          [LAST_APPLIED]: '{"data":{"password":"aHVudGVyMg=="},"kind":"Secret"}',
          'team.example/owner': 'payments',
        },
      },
      data: { password: 'aHVudGVyMg==' },
    },
  });
});

afterAll(async () => {
  await proxy.close();
  for (const ns of namespaces) await ns.delete();
});

describe('live query: the policy gate', () => {
  it('refuses another namespace, bad references and a disabled query without an API call', async () => {
    await using agent = await startQueryAgent(
      proxy.kubeConfig,
      config(`{rules: [{id: a-only, namespace: "${nsA.name}", resources: [configmaps]}]}`),
    );
    const before = proxy.bytesToServer();
    const other = await agent.ask({ ref: CONFIGMAPS, verb: LIST, namespace: nsB.name });
    expect(code(other)).toBe(QueryErrorCode.QUERY_ERROR_POLICY_DENIED);
    expect(other.error?.message).toContain(`in namespace "${nsB.name}"`);
    const everywhere = await agent.ask({ ref: CONFIGMAPS, verb: LIST, namespace: '' });
    expect(code(everywhere)).toBe(QueryErrorCode.QUERY_ERROR_POLICY_DENIED);
    expect(proxy.bytesToServer()).toBe(before);
    // The same agent reading what its rule allows is seen by the proxy: the count is live.
    const allowed = await agent.ask({ ref: CONFIGMAPS, verb: LIST, namespace: nsA.name });
    expect(names(allowed)).toEqual(['db-1', 'kube-root-ca.crt', 'web-1', 'web-2']);
    expect(proxy.bytesToServer()).toBeGreaterThan(before);
    const metrics = await agent.registry.getSingleMetricAsString('kubexa_collector_query_total');
    expect(metrics).toMatch(
      /kubexa_collector_query_total\{verb="list",resource="other",view="full",outcome="policy_denied"\} 2/,
    );
  });

  it('refuses malformed references under a "*" rule without an API call', async () => {
    await using agent = await startQueryAgent(
      proxy.kubeConfig,
      config(`{rules: [{resources: ["*"]}]}`),
    );
    const before = proxy.bytesToServer();
    for (const ref of [
      { group: '', version: 'v1', resource: './secrets' },
      { group: '', version: 'v1', resource: 'SECRETS' },
      { group: '', version: 'v1', resource: 'x/../secrets' },
      { group: 'x', version: '..', resource: 'secrets' },
      { group: '', version: 'v1', resource: 'secrets/' },
    ]) {
      const result = await agent.ask({ ref, verb: LIST, namespace: nsA.name });
      expect(code(result), JSON.stringify(ref)).toBe(QueryErrorCode.QUERY_ERROR_POLICY_DENIED);
      expect(result.error?.message).toContain('invalid resource reference');
    }
    const traversal = await agent.ask({ ref: SECRETS, verb: GET, namespace: nsA.name, name: '..' });
    expect(code(traversal)).toBe(QueryErrorCode.QUERY_ERROR_POLICY_DENIED);
    expect(proxy.bytesToServer()).toBe(before);
    // The wildcard covers any well-formed resource, built-in or not.
    const deployments = await agent.ask({
      ref: { group: 'apps', version: 'v1', resource: 'deployments' },
      verb: LIST,
      namespace: nsA.name,
    });
    expect(names(deployments)).toEqual([]);
  });

  it('answers every query with POLICY_DENIED and a reason when query.enabled is false', async () => {
    await using agent = await startQueryAgent(
      proxy.kubeConfig,
      config(`{enabled: false, rules: [{resources: ["*"]}]}`),
    );
    const before = proxy.bytesToServer();
    const result = await agent.ask({ ref: CONFIGMAPS, verb: LIST, namespace: nsA.name });
    expect(code(result)).toBe(QueryErrorCode.QUERY_ERROR_POLICY_DENIED);
    expect(result.error?.message).toContain('query.enabled: false');
    expect(proxy.bytesToServer()).toBe(before);
  });

  it('filters list rows by the rule names in both views and refuses a get outside them', async () => {
    await using agent = await startQueryAgent(
      proxy.kubeConfig,
      config(`{rules: [{namespace: "${nsA.name}", resources: [configmaps], names: ["web-*"]}]}`),
    );
    const query = { ref: CONFIGMAPS, verb: LIST, namespace: nsA.name };
    expect(names(await agent.ask({ ...query, view: FULL }))).toEqual(['web-1', 'web-2']);
    expect(names(await agent.ask({ ...query, view: TABLE }))).toEqual(['web-1', 'web-2']);
    const denied = await agent.ask({ ...query, verb: GET, name: 'db-1' });
    expect(code(denied)).toBe(QueryErrorCode.QUERY_ERROR_POLICY_DENIED);
    const allowed = await agent.ask({ ...query, verb: GET, name: 'web-2' });
    expect((payloadJson(allowed) as { data: unknown }).data).toEqual({ key: 'web-2' });
  });

  it('lets the first matching rule win, verbs included: list-only secrets refuse a get', async () => {
    await using agent = await startQueryAgent(
      proxy.kubeConfig,
      config(
        `{rules: [{id: list-secrets, namespace: "${nsA.name}", resources: [secrets], verbs: [list]}, {id: later, resources: [configmaps]}]}`,
      ),
    );
    const get = await agent.ask({ ref: SECRETS, verb: GET, namespace: nsA.name, name: 'creds' });
    expect(code(get)).toBe(QueryErrorCode.QUERY_ERROR_POLICY_DENIED);
    expect(get.error?.message).toContain('does not permit get');
    // verbs do not redact: the list carries the values, as kubectl get -o json would.
    const list = await agent.ask({ ref: SECRETS, verb: LIST, namespace: nsA.name });
    const creds = (payloadJson(list) as { metadata: { name: string }; data?: unknown }[]).find(
      (secret) => secret.metadata.name === 'creds',
    );
    expect(creds?.data).toEqual({ password: 'aHVudGVyMg==' });
  });

  it('ANDs the rule selector with the request selector in both views', async () => {
    await using agent = await startQueryAgent(
      proxy.kubeConfig,
      config(`{rules: [{resources: [configmaps], label_selector: tier=web}]}`),
    );
    const query = { ref: CONFIGMAPS, verb: LIST, namespace: nsA.name, labelSelector: 'app=shop' };
    expect(names(await agent.ask({ ...query, view: FULL }))).toEqual(['web-1']);
    expect(names(await agent.ask({ ...query, view: TABLE }))).toEqual(['web-1']);
    // All namespaces (the rule has none): the selector still applies.
    expect(names(await agent.ask({ ...query, namespace: '' }))).toEqual(['other-1', 'web-1']);
  });
});

describe('live query: sanitizing', () => {
  it('strips managedFields and last-applied always, and Secret values when redaction is on', async () => {
    const rules = `rules: [{resources: [secrets], namespace: "${nsA.name}"}]`;
    await using open = await startQueryAgent(proxy.kubeConfig, config(`{${rules}}`));
    const query = { ref: SECRETS, verb: GET, namespace: nsA.name, name: 'creds' };
    const text = Buffer.from((await open.ask(query)).payload).toString('utf8');
    const secret = JSON.parse(text) as {
      metadata: { annotations: Record<string, string>; managedFields?: unknown };
      data?: unknown;
    };
    expect(secret.metadata.managedFields).toBeUndefined();
    expect(secret.metadata.annotations).toEqual({ 'team.example/owner': 'payments' });
    expect(secret.data).toEqual({ password: 'aHVudGVyMg==' });
    const table = await open.ask({ ...query, verb: LIST, view: TABLE, name: '' });
    const tableText = Buffer.from(table.payload).toString('utf8');
    expect(tableText).toContain('"creds"');
    expect(tableText).not.toContain('aHVudGVyMg==');
    expect(tableText).not.toContain('managedFields');

    await using redacting = await startQueryAgent(
      proxy.kubeConfig,
      config(`{redact_secrets: true, ${rules}}`),
    );
    for (const view of [FULL, TABLE]) {
      for (const verb of [GET, LIST]) {
        const result = await redacting.ask({ ...query, verb, view });
        expect(result.error).toBeUndefined();
        expect(Buffer.from(result.payload).toString('utf8')).not.toContain('aHVudGVyMg==');
      }
    }
  });
});

describe('live query: security.profile strict reads Secrets as metadata only', () => {
  it('the API server never sends the values to the collector, in any verb or view; the default profile is the control', async () => {
    const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
    const namespace = nsA.name;
    const canary = 'kubexa-canary-query-strict-5e1c9a7d30b4f286';
    const spellings = [canary, Buffer.from(canary).toString('base64')];
    await core.createNamespacedSecret({
      namespace,
      body: { metadata: { name: 'strict-canary' }, stringData: { token: canary } },
    });
    // As kubectl's client-side apply writes one: its last-applied annotation is a second copy of
    // the value, and an annotation is metadata, so a metadata-only read receives it (the
    // collector drops it before anything leaves; docs/security.md says so).
    const applied = 'kubexa-canary-query-applied-0b8e6d2c71f9a345';
    await core.createNamespacedSecret({
      namespace,
      body: {
        metadata: {
          name: 'strict-applied',
          annotations: {
            [LAST_APPLIED]: JSON.stringify({ kind: 'Secret', stringData: { token: applied } }),
          },
        },
        stringData: { token: applied },
      },
    });
    // The collector's identity is a bearer token, so the recording proxy can pass it on.
    await core.createNamespacedServiceAccount({
      namespace,
      body: { metadata: { name: 'secret-reader' } },
    });
    await rbac.createNamespacedRole({
      namespace,
      body: {
        metadata: { name: 'secret-reader' },
        rules: [{ apiGroups: [''], resources: ['secrets'], verbs: ['get', 'list'] }],
      },
    });
    await rbac.createNamespacedRoleBinding({
      namespace,
      body: {
        metadata: { name: 'secret-reader' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'secret-reader' },
        subjects: [{ kind: 'ServiceAccount', name: 'secret-reader', namespace }],
      },
    });
    const minted = await core.createNamespacedServiceAccountToken({
      name: 'secret-reader',
      namespace,
      body: { spec: { audiences: [], expirationSeconds: 600 } },
    });
    const recording = await startRecordingProxy(kc);
    try {
      const kube = recording.kubeConfigFor(minted.status?.token ?? '');
      const rules = `rules: [{resources: [secrets], namespace: "${namespace}"}]`;
      const ask = async (profile: 'default' | 'strict') => {
        await using agent = await startQueryAgent(
          kube,
          `${config(`{${rules}}`)}security: {profile: ${profile}}\n`,
        );
        const get = { ref: SECRETS, verb: GET, namespace, name: 'strict-canary' };
        const list = { ref: SECRETS, verb: LIST, namespace };
        const queries = [
          get,
          { ...get, view: TABLE },
          list,
          { ...list, view: TABLE },
          // A page of one: the next page (its continue token) is read the same way.
          { ...list, limit: 1 },
        ];
        const answers: string[] = [];
        await eventually(
          'the Role to take effect',
          async () => (await agent.ask(list)).error === undefined || undefined,
          { timeoutMs: 20_000 },
        );
        for (const query of queries) {
          const answer = await agent.ask(query);
          expect(answer.error, JSON.stringify(query)).toBeUndefined();
          answers.push(Buffer.from(answer.payload).toString('utf8'));
          if (answer.continueToken !== '') {
            const next = await agent.ask({ ...query, continueToken: answer.continueToken });
            expect(next.error).toBeUndefined();
            answers.push(Buffer.from(next.payload).toString('utf8'));
          }
        }
        return answers;
      };

      // The control: under default the values reach the collector (and the answer), so the
      // proxy's record would show a leak.
      const defaultAnswers = await ask('default');
      const received = () => recording.exchanges.map((exchange) => exchange.body.toString('utf8'));
      expect(received().some((body) => spellings.some((form) => body.includes(form)))).toBe(true);
      expect(
        defaultAnswers.some((text) => text.includes(Buffer.from(canary).toString('base64'))),
      ).toBe(true);

      recording.exchanges.splice(0);
      const strictAnswers = await ask('strict');
      const secretReads = recording.exchanges.filter((exchange) =>
        exchange.path.includes('/secrets'),
      );
      expect(secretReads.length).toBeGreaterThanOrEqual(6);
      for (const exchange of secretReads) {
        expect(exchange.status, exchange.path).toBe(200);
        // Metadata only: PartialObjectMetadata(List), or the Table with metadata objects.
        expect(exchange.accept, exchange.path).toMatch(
          /^application\/json;as=(PartialObjectMetadata|PartialObjectMetadataList|Table);/,
        );
      }
      for (const body of received()) {
        for (const form of spellings) expect(body.includes(form)).toBe(false);
        // The applied Secret's data never came; its annotation's copy did, as metadata.
        expect(body.includes(Buffer.from(applied).toString('base64'))).toBe(false);
      }
      expect(received().some((body) => body.includes(applied))).toBe(true);
      // The platform still sees a Secret, by name, without a body.
      const fullGet = JSON.parse(strictAnswers[0] ?? '{}') as Record<string, unknown>;
      expect(fullGet).toMatchObject({
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name: 'strict-canary', namespace },
      });
      expect(fullGet['data']).toBeUndefined();
      const fullList = JSON.parse(strictAnswers[2] ?? '[]') as Record<string, unknown>[];
      expect(fullList.map((item) => [item['kind'], item['apiVersion']])).toContainEqual([
        'Secret',
        'v1',
      ]);
      for (const text of strictAnswers) {
        for (const form of [...spellings, applied]) expect(text.includes(form)).toBe(false);
      }
      expect(strictAnswers.join('\n')).toContain('"strict-canary"');
    } finally {
      await recording.close();
    }
  });
});

describe('live query: errors from the API server', () => {
  it('maps 403 to RBAC_DENIED and 404 to NOT_FOUND with the API server message', async () => {
    const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
    const namespace = nsA.name;
    await core.createNamespacedServiceAccount({
      namespace,
      body: { metadata: { name: 'narrow' } },
    });
    await rbac.createNamespacedRole({
      namespace,
      body: {
        metadata: { name: 'configmap-reader' },
        rules: [{ apiGroups: [''], resources: ['configmaps'], verbs: ['get', 'list'] }],
      },
    });
    await rbac.createNamespacedRoleBinding({
      namespace,
      body: {
        metadata: { name: 'narrow-configmap-reader' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'configmap-reader' },
        subjects: [{ kind: 'ServiceAccount', name: 'narrow', namespace }],
      },
    });
    const token = await core.createNamespacedServiceAccountToken({
      name: 'narrow',
      namespace,
      body: { spec: { audiences: [], expirationSeconds: 600 } },
    });
    const cluster = kc.getCurrentCluster();
    if (cluster === null || token.status === undefined) throw new Error('no cluster or token');
    const narrow = new KubeConfig();
    narrow.loadFromOptions({
      clusters: [cluster],
      users: [{ name: 'narrow', token: token.status.token }],
      contexts: [{ name: 'narrow', cluster: cluster.name, user: 'narrow' }],
      currentContext: 'narrow',
    });
    await using agent = await startQueryAgent(narrow, config(`{rules: [{resources: ["*"]}]}`));
    await eventually(
      'the narrow role to take effect',
      async () =>
        (await agent.ask({ ref: CONFIGMAPS, verb: LIST, namespace })).error === undefined ||
        undefined,
      { timeoutMs: 20_000 },
    );
    const forbidden = await agent.ask({ ref: SECRETS, verb: LIST, namespace });
    expect(code(forbidden)).toBe(QueryErrorCode.QUERY_ERROR_RBAC_DENIED);
    expect(forbidden.error?.message).toMatch(/secrets is forbidden: User "system:serviceaccount:/);
    const missing = await agent.ask({ ref: CONFIGMAPS, verb: GET, namespace, name: 'absent' });
    expect(code(missing)).toBe(QueryErrorCode.QUERY_ERROR_NOT_FOUND);
    expect(missing.error?.message).toBe('configmaps "absent" not found');
  });

  it('maps an expired continue token (410 after etcd compaction) to EXPIRED', async () => {
    // PodTemplates bypass the watch cache in the harness, so a continue token reaches etcd.
    const ns = await newNamespace('query-expired');
    for (const n of [1, 2, 3]) {
      await core.createNamespacedPodTemplate({
        namespace: ns.name,
        body: {
          metadata: { name: `t-${String(n)}` },
          template: { spec: { containers: [{ name: 'c', image: 'busybox' }] } },
        },
      });
    }
    await using agent = await startQueryAgent(
      proxy.kubeConfig,
      config(`{rules: [{resources: ["*"]}]}`),
    );
    const podTemplates = { group: '', version: 'v1', resource: 'podtemplates' };
    const first = await agent.ask({ ref: podTemplates, verb: LIST, namespace: ns.name, limit: 1 });
    expect(names(first)).toEqual(['t-1']);
    expect(first.continueToken).not.toBe('');
    expect(first.remaining).toBe(2);
    // Writes move etcd's revision on; the harness compacts every 10 s.
    const expired = await eventually(
      'the continue token to expire',
      async () => {
        await core.createNamespacedConfigMap({
          namespace: ns.name,
          body: { metadata: { generateName: 'tick-' } },
        });
        const next = await agent.ask({
          ref: podTemplates,
          verb: LIST,
          namespace: ns.name,
          limit: 1,
          continueToken: first.continueToken,
        });
        return code(next) === QueryErrorCode.QUERY_ERROR_EXPIRED ? next : undefined;
      },
      { timeoutMs: 90_000, intervalMs: 2000 },
    );
    expect(expired.error?.message).toMatch(/continue/i);
  });

  it('answers TIMEOUT when the API server is slower than the deadline', async () => {
    await using agent = await startQueryAgent(
      proxy.kubeConfig,
      config(`{rules: [{resources: ["*"]}]}`),
    );
    proxy.setDelay(3000);
    try {
      const result = await agent.ask({
        ref: CONFIGMAPS,
        verb: LIST,
        namespace: nsA.name,
        timeoutMs: 1000,
      });
      expect(code(result)).toBe(QueryErrorCode.QUERY_ERROR_TIMEOUT);
      expect(result.error?.message).toContain('within 1000 ms');
    } finally {
      proxy.setDelay(0);
    }
  });
});

describe('live query: concurrency', () => {
  it('runs 4, queues 8, refuses the 13th at once, and answers other messages meanwhile', async () => {
    await using agent = await startQueryAgent(
      proxy.kubeConfig,
      config(`{rules: [{namespace: "${nsA.name}", resources: ["*"]}]}`),
    );
    // Warm: connections exist before the API server turns slow.
    await agent.ask({ ref: CONFIGMAPS, verb: LIST, namespace: nsA.name });
    proxy.setDelay(1500);
    try {
      const settled: (ResourceQueryResult | undefined)[] = [];
      const slow = Array.from({ length: 13 }, (_, i) =>
        agent
          .ask({ ref: CONFIGMAPS, verb: LIST, namespace: nsA.name, timeoutMs: 30_000 })
          .then((result) => {
            settled[i] = result;
            return result;
          }),
      );
      // A refusal on the same stream is not held up by the slow queries ahead of it.
      const denied = await agent.ask({ ref: CONFIGMAPS, verb: LIST, namespace: nsB.name });
      expect(code(denied)).toBe(QueryErrorCode.QUERY_ERROR_POLICY_DENIED);
      const thirteenth = await (slow[12] ?? Promise.reject(new Error('no 13th query')));
      expect(code(thirteenth)).toBe(QueryErrorCode.QUERY_ERROR_RESOURCE_EXHAUSTED);
      expect(thirteenth.error?.message).toContain('too many concurrent queries');
      expect(settled.slice(0, 12).filter((result) => result !== undefined)).toEqual([]);
      const results = await Promise.all(slow.slice(0, 12));
      expect(results.map(code)).toEqual(Array.from({ length: 12 }, () => undefined));
    } finally {
      proxy.setDelay(0);
    }
  });
});

describe('live query: size caps and numbers', () => {
  it('cuts a FULL list at 8 MiB with truncated, and the continue token resumes after the cut', async () => {
    const ns = await newNamespace('query-big');
    const value = 'x'.repeat(950 * 1024);
    for (let i = 0; i < 10; i++) {
      await core.createNamespacedConfigMap({
        namespace: ns.name,
        body: { metadata: { name: `big-${String(i).padStart(2, '0')}` }, data: { value } },
      });
    }
    await using agent = await startQueryAgent(
      proxy.kubeConfig,
      config(`{rules: [{resources: [configmaps], names: ["big-*"]}]}`),
    );
    const first = await agent.ask({ ref: CONFIGMAPS, verb: LIST, namespace: ns.name });
    expect(first.truncated).toBe(true);
    expect(first.payload.length).toBeLessThanOrEqual(8 * 1024 * 1024);
    const firstNames = names(first);
    expect(firstNames.length).toBe(8);
    const second = await agent.ask({
      ref: CONFIGMAPS,
      verb: LIST,
      namespace: ns.name,
      continueToken: first.continueToken,
    });
    expect(second.truncated).toBe(false);
    // Nothing skipped, nothing twice.
    expect([...firstNames, ...names(second)]).toEqual(
      Array.from({ length: 10 }, (_, i) => `big-${String(i).padStart(2, '0')}`),
    );
  });

  it('refuses a TABLE answer over 8 MiB with TOO_LARGE', async () => {
    const ns = await newNamespace('query-wide');
    const note = 'y'.repeat(240 * 1024);
    for (let i = 0; i < 36; i++) {
      await core.createNamespacedConfigMap({
        namespace: ns.name,
        body: { metadata: { name: `wide-${String(i)}`, annotations: { note } } },
      });
    }
    await using agent = await startQueryAgent(
      proxy.kubeConfig,
      config(`{rules: [{resources: [configmaps]}]}`),
    );
    const result = await agent.ask({
      ref: CONFIGMAPS,
      verb: LIST,
      view: TABLE,
      namespace: ns.name,
    });
    expect(code(result)).toBe(QueryErrorCode.QUERY_ERROR_TOO_LARGE);
    expect(result.payload.length).toBe(0);
    // A smaller page fits.
    const page = await agent.ask({
      ref: CONFIGMAPS,
      verb: LIST,
      view: TABLE,
      namespace: ns.name,
      limit: 10,
    });
    expect(page.error).toBeUndefined();
    expect(page.remaining).toBeGreaterThan(0);
    expect(page.continueToken).not.toBe('');
  });

  it('refuses one object over 8 MiB with TOO_LARGE (GET in both views, and a LIST whose first item it is)', async () => {
    // One object whose JSON is over 8 MiB, through the real API server: etcd keeps at most 1.5
    // MiB a value and kube-apiserver reads at most 3 MiB of a write body, so the object is
    // written in protobuf (as kubelets write) and its JSON is six times larger: each 0x01 byte of
    // a container argument is one byte in protobuf and six ("\u0001") in the JSON the API server
    // answers a GET with. No limit of the harness is raised.
    const ns = await newNamespace('query-huge');
    const args = Array.from({ length: 14 }, () => '\x01'.repeat(100 * 1024));
    const created = await createProtobufPodTemplate(kc, ns.name, 'huge', args);
    expect(created.status, created.body).toBe(201);
    // The API server's own answer to a plain GET is over 8 MiB (read here with a larger cap).
    const direct = createKubeRest(kc);
    try {
      const raw = await direct.request({
        method: 'GET',
        path: `/api/v1/namespaces/${ns.name}/podtemplates/huge`,
        maxBodyBytes: 32 * 1024 * 1024,
        signal: AbortSignal.timeout(30_000),
      });
      expect(raw.status).toBe(200);
      expect(raw.body.length).toBeGreaterThan(8 * 1024 * 1024);
    } finally {
      direct.close();
    }
    await using agent = await startQueryAgent(
      proxy.kubeConfig,
      config(`{rules: [{resources: [v1/podtemplates]}]}`),
    );
    const podTemplates = { group: '', version: 'v1', resource: 'podtemplates' };
    for (const view of [FULL, TABLE]) {
      const get = await agent.ask({
        ref: podTemplates,
        verb: GET,
        view,
        namespace: ns.name,
        name: 'huge',
      });
      expect(code(get)).toBe(QueryErrorCode.QUERY_ERROR_TOO_LARGE);
      expect(get.error?.message).toMatch(/^object is \d+ bytes, over the 8388608 byte limit$/);
      expect(Number(/\d+/.exec(get.error?.message ?? '')?.[0])).toBeGreaterThan(8 * 1024 * 1024);
      expect(get.payload.length).toBe(0);
    }
    const list = await agent.ask({ ref: podTemplates, verb: LIST, namespace: ns.name });
    expect(code(list)).toBe(QueryErrorCode.QUERY_ERROR_TOO_LARGE);
    expect(list.error?.message).toContain('the first object of this page is over');
    // The TABLE view carries metadata only, so the same list fits.
    expect(
      names(await agent.ask({ ref: podTemplates, verb: LIST, view: TABLE, namespace: ns.name })),
    ).toEqual(['huge']);
  });

  it('keeps int64 values beyond 2^53 byte-identical in TABLE cells and FULL objects', async () => {
    const group = 'query.kubexa.test';
    const ext = kc.makeApiClient(ApiextensionsV1Api);
    await ext.createCustomResourceDefinition({
      body: {
        metadata: { name: `counters.${group}` },
        spec: {
          group,
          scope: 'Namespaced',
          names: { plural: 'counters', singular: 'counter', kind: 'Counter' },
          versions: [
            {
              name: 'v1',
              served: true,
              storage: true,
              schema: {
                openAPIV3Schema: {
                  type: 'object',
                  properties: {
                    spec: {
                      type: 'object',
                      properties: { count: { type: 'integer', format: 'int64' } },
                    },
                  },
                },
              },
              additionalPrinterColumns: [
                { name: 'Count', type: 'integer', jsonPath: '.spec.count' },
              ],
            },
          ],
        },
      },
    });
    const custom = kc.makeApiClient(CustomObjectsApi);
    const big = '9007199254740993'; // 2^53 + 1: a double would print ...992
    await eventually(
      'the Counter CRD to serve',
      async () => {
        // Written as raw JSON text so the test's own client cannot round the number.
        await custom.createNamespacedCustomObject({
          group,
          version: 'v1',
          namespace: nsA.name,
          plural: 'counters',
          body: JSON.parse(
            `{"apiVersion":"${group}/v1","kind":"Counter","metadata":{"name":"c1"},"spec":{"count":1}}`,
          ) as object,
        });
        return true;
      },
      { timeoutMs: 30_000, intervalMs: 500 },
    );
    await using agent = await startQueryAgent(kc, config(`{rules: [{resources: ["*"]}]}`));
    // The write: a JSON merge patch with the exact digits, through the agent's own HTTPS path.
    const live = createKubeRest(kc);
    const patched = await live.request({
      method: 'POST',
      path: `/apis/${group}/v1/namespaces/${nsA.name}/counters`,
      body: Buffer.from(
        `{"apiVersion":"${group}/v1","kind":"Counter","metadata":{"name":"c2"},"spec":{"count":${big}}}`,
      ),
      maxBodyBytes: 1 << 20,
      signal: AbortSignal.timeout(10_000),
    });
    live.close();
    expect(patched.status).toBe(201);
    const ref = { group, version: 'v1', resource: 'counters' };
    const table = await agent.ask({ ref, verb: LIST, view: TABLE, namespace: nsA.name });
    const tableText = Buffer.from(table.payload).toString('utf8');
    expect(tableText).toContain(`["c2",${big}]`);
    const full = await agent.ask({ ref, verb: GET, namespace: nsA.name, name: 'c2' });
    expect(Buffer.from(full.payload).toString('utf8')).toContain(`"count":${big}`);
  });
});

/** Protobuf wire format: a varint. */
function varint(value: number): Buffer {
  const bytes: number[] = [];
  let rest = value;
  while (rest >= 0x80) {
    bytes.push((rest & 0x7f) | 0x80);
    rest = Math.floor(rest / 128);
  }
  bytes.push(rest);
  return Buffer.from(bytes);
}

/** Protobuf wire format: field `n`, length-delimited (a string or a message). */
function field(n: number, value: Buffer | string): Buffer {
  const bytes = typeof value === 'string' ? Buffer.from(value, 'utf8') : value;
  return Buffer.concat([varint((n << 3) | 2), varint(bytes.length), bytes]);
}

/**
 * Creates a v1 PodTemplate with one container whose args are given, sent in the API server's
 * protobuf encoding (field numbers from k8s.io/api/core/v1/generated.proto; the envelope is
 * "k8s\0" and a runtime.Unknown), so a write body far smaller than the object's JSON.
 */
async function createProtobufPodTemplate(
  kube: KubeConfig,
  namespace: string,
  name: string,
  args: readonly string[],
): Promise<{ status: number; body: string }> {
  const container = Buffer.concat([
    field(1, 'c'), // Container.name
    field(2, 'busybox'), // Container.image
    ...args.map((arg) => field(4, arg)), // Container.args
  ]);
  const podTemplate = Buffer.concat([
    field(1, field(1, name)), // PodTemplate.metadata: ObjectMeta.name
    field(2, field(2, field(2, container))), // .template: PodTemplateSpec.spec: PodSpec.containers
  ]);
  const unknown = Buffer.concat([
    field(1, Buffer.concat([field(1, 'v1'), field(2, 'PodTemplate')])), // typeMeta
    field(2, podTemplate), // raw
  ]);
  const body = Buffer.concat([Buffer.from('k8s\0', 'latin1'), unknown]);
  const cluster = kube.getCurrentCluster();
  if (cluster === null) throw new Error('the kubeconfig has no current cluster');
  const url = new URL(`/api/v1/namespaces/${namespace}/podtemplates`, cluster.server);
  const options: RequestOptions = {
    method: 'POST',
    headers: {
      'content-type': 'application/vnd.kubernetes.protobuf',
      accept: 'application/json',
      'content-length': body.length,
    },
  };
  await kube.applyToHTTPSOptions(options);
  return new Promise((resolve, reject) => {
    const req = httpsRequest(url, options, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.once('end', () => {
        resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') });
      });
      res.once('error', reject);
    });
    req.once('error', reject);
    req.end(body);
  });
}
