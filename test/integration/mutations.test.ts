// Generic mutations through the executor against the real API server: each verb allowed by a
// mutate.rules entry (create, update, patch in its four kinds, scale, delete with a propagation
// policy), each refused outside the rules (update included), the API server's own 403 when the
// executor's ServiceAccount lacks rbac.write, a dry run, and the guard's refusals, all sent
// straight to the executor's socket as a compromised collector would.
import { AppsV1Api, CoreV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { PatchType, RefusalCode } from '../../proto/index.js';
import { createTestNamespace, loadKubeConfig, type TestNamespace } from '../helpers/kube.js';
import {
  removeServiceAccountGrants,
  serviceAccountKubeConfig,
  startTestExecutor,
  type TestExecutor,
} from '../helpers/node-job-executor.js';

const kc = loadKubeConfig(inject('kubeconfigPath'));
const core = kc.makeApiClient(CoreV1Api);
const apps = kc.makeApiClient(AppsV1Api);
/** A slice of the chart's rbac.write grants. */
const WRITE_RULES = [
  { apiGroups: [''], resources: ['configmaps'], verbs: ['create', 'update', 'patch', 'delete'] },
  {
    apiGroups: ['apps'],
    resources: ['deployments'],
    verbs: ['create', 'update', 'patch', 'delete'],
  },
  { apiGroups: ['apps'], resources: ['deployments/scale'], verbs: ['get', 'update', 'patch'] },
];

let ns: TestNamespace;
let other: TestNamespace;
let executor: TestExecutor;
let noRbac: TestExecutor;
let gateOff: TestExecutor;

const config = (enabled: boolean, namespace: string) => `
mutate:
  enabled: ${String(enabled)}
  rules:
    - id: app-config
      namespace: ${namespace}
      resources: [configmaps]
      names: ["app-*"]
      verbs: [create, update, patch, delete]
    - id: web-scale
      namespace: ${namespace}
      resources: [apps/v1/deployments]
      names: [web]
      verbs: [scale]
`;

const json = (value: unknown) => Buffer.from(JSON.stringify(value));
const configMap = (name: string, data: Record<string, string>) =>
  json({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name }, data });
const readData = async (name: string) =>
  (await core.readNamespacedConfigMap({ name, namespace: ns.name })).data;
const exists = (name: string) =>
  core.readNamespacedConfigMap({ name, namespace: ns.name }).then(
    () => true,
    () => false,
  );

beforeAll(async () => {
  ns = await createTestNamespace(kc, 'mutations');
  other = await createTestNamespace(kc, 'mutations-other');
  const writer = await serviceAccountKubeConfig(kc, ns.name, 'writer', WRITE_RULES);
  const reader = await serviceAccountKubeConfig(kc, ns.name, 'reader', []);
  executor = await startTestExecutor({ kc: writer, configYaml: config(true, ns.name) });
  noRbac = await startTestExecutor({ kc: reader, configYaml: config(true, ns.name) });
  gateOff = await startTestExecutor({ kc: writer, configYaml: config(false, ns.name) });
  await apps.createNamespacedDeployment({
    namespace: ns.name,
    body: {
      metadata: { name: 'web' },
      spec: {
        replicas: 1,
        selector: { matchLabels: { app: 'web' } },
        template: {
          metadata: { labels: { app: 'web' } },
          spec: { containers: [{ name: 'app', image: 'registry.invalid/web:1' }] },
        },
      },
    },
  });
  await core.createNamespacedConfigMap({
    namespace: other.name,
    body: { metadata: { name: 'app-elsewhere' }, data: { a: '1' } },
  });
});

afterAll(async () => {
  for (const e of [executor, noRbac, gateOff]) await e.close();
  await removeServiceAccountGrants(kc, ns.name, 'writer');
  await ns.delete();
  await other.delete();
});

describe('mutations allowed by mutate.rules', () => {
  const cm = (fields: Parameters<TestExecutor['mutation']>[0]) =>
    executor.mutation({ namespace: ns.name, resource: 'configmaps', ...fields });

  it('creates, and a dry-run create writes nothing', async () => {
    const dry = await executor.applyMutation(
      cm({ verb: 'create', name: 'app-dry', body: configMap('app-dry', { a: '1' }), dryRun: true }),
    );
    expect(dry).toMatchObject({ status: 'Success', httpStatus: 201 });
    expect(dry.audit).toMatchObject({ rule: 'app-config', dryRun: true, outcome: 'succeeded' });
    expect(await exists('app-dry')).toBe(false);
    const made = await executor.applyMutation(
      cm({ verb: 'create', name: 'app-1', body: configMap('app-1', { a: '1' }) }),
    );
    expect(made).toMatchObject({ status: 'Success', httpStatus: 201 });
    expect(made.resourceVersion).not.toBe('');
    expect(await readData('app-1')).toEqual({ a: '1' });
  });

  it('updates, and patches with merge, strategic, JSON and server-side apply', async () => {
    const updated = await executor.applyMutation(
      cm({ verb: 'update', name: 'app-1', body: configMap('app-1', { a: '2' }) }),
    );
    expect(updated.status).toBe('Success');
    expect(await readData('app-1')).toEqual({ a: '2' });
    const patches: [PatchType, unknown, Record<string, string>][] = [
      [PatchType.PATCH_TYPE_MERGE, { data: { b: 'merge' } }, { a: '2', b: 'merge' }],
      [PatchType.PATCH_TYPE_STRATEGIC, { data: { c: 'sm' } }, { a: '2', b: 'merge', c: 'sm' }],
      [PatchType.PATCH_TYPE_JSON, [{ op: 'remove', path: '/data/b' }], { a: '2', c: 'sm' }],
    ];
    for (const [patchType, body, expected] of patches) {
      const answer = await executor.applyMutation(
        cm({ verb: 'patch', name: 'app-1', patchType, body: json(body) }),
      );
      expect(answer.status, `patch type ${String(patchType)}`).toBe('Success');
      expect(await readData('app-1')).toEqual(expected);
    }
    const applied = await executor.applyMutation(
      cm({
        verb: 'patch',
        name: 'app-1',
        patchType: PatchType.PATCH_TYPE_APPLY,
        fieldManager: 'platform',
        force: true,
        body: json({
          apiVersion: 'v1',
          kind: 'ConfigMap',
          metadata: { name: 'app-1' },
          data: { a: 'applied' },
        }),
      }),
    );
    expect(applied.status).toBe('Success');
    expect((await readData('app-1'))?.['a']).toBe('applied');
  });

  it('scales, and deletes with a propagation policy', async () => {
    const scaled = await executor.applyMutation(
      executor.mutation({
        verb: 'scale',
        group: 'apps',
        version: 'v1',
        resource: 'deployments',
        namespace: ns.name,
        name: 'web',
        replicas: 3,
      }),
    );
    expect(scaled).toMatchObject({ status: 'Success', httpStatus: 200 });
    expect(
      (await apps.readNamespacedDeployment({ name: 'web', namespace: ns.name })).spec?.replicas,
    ).toBe(3);
    const deleted = await executor.applyMutation(
      cm({ verb: 'delete', name: 'app-1', propagationPolicy: 'Background' }),
    );
    expect(deleted.status).toBe('Success');
    expect(await exists('app-1')).toBe(false);
  });

  it("returns the API server's status and message when it refuses the write", async () => {
    const missing = await executor.applyMutation(
      cm({
        verb: 'patch',
        name: 'app-missing',
        patchType: PatchType.PATCH_TYPE_MERGE,
        body: json({ data: {} }),
      }),
    );
    expect(missing).toMatchObject({ status: 'Failure', httpStatus: 404, reason: 'NotFound' });
    expect(missing.message).toContain('app-missing');
  });
});

describe('mutation refusals, straight to the socket', () => {
  it('refuses every write outside the rules, and changes nothing', async () => {
    await core.createNamespacedConfigMap({
      namespace: ns.name,
      body: { metadata: { name: 'keep-me' }, data: { k: 'v' } },
    });
    const webGeneration = (await apps.readNamespacedDeployment({ name: 'web', namespace: ns.name }))
      .metadata?.generation;
    const outside = [
      // another name
      executor.mutation({
        verb: 'patch',
        namespace: ns.name,
        name: 'keep-me',
        patchType: PatchType.PATCH_TYPE_MERGE,
        body: json({ data: { k: 'x' } }),
      }),
      // an update of another name
      executor.mutation({
        verb: 'update',
        namespace: ns.name,
        name: 'keep-me',
        body: configMap('keep-me', { k: 'updated' }),
      }),
      // an update in another namespace
      executor.mutation({
        verb: 'update',
        namespace: other.name,
        name: 'app-elsewhere',
        body: configMap('app-elsewhere', { a: 'updated' }),
      }),
      // an update where the rule lists only scale
      executor.mutation({
        verb: 'update',
        group: 'apps',
        version: 'v1',
        resource: 'deployments',
        namespace: ns.name,
        name: 'web',
        body: json({ apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: 'web' } }),
      }),
      // another namespace
      executor.mutation({ verb: 'delete', namespace: other.name, name: 'app-elsewhere' }),
      // a verb the rule does not list
      executor.mutation({
        verb: 'delete',
        group: 'apps',
        version: 'v1',
        resource: 'deployments',
        namespace: ns.name,
        name: 'web',
      }),
      // a resource no rule names
      executor.mutation({
        verb: 'create',
        resource: 'secrets',
        namespace: ns.name,
        name: 'app-s',
        body: json({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'app-s' } }),
      }),
      // scale where only patch-like verbs are allowed
      executor.mutation({
        verb: 'scale',
        group: 'apps',
        version: 'v1',
        resource: 'deployments',
        namespace: ns.name,
        name: 'api',
        replicas: 5,
      }),
    ];
    for (const request of outside) {
      const answer = await executor.applyMutation(request);
      expect(
        answer.refusal?.code,
        `${request.verb} ${request.resource} ${request.namespace}/${request.name}`,
      ).toBe(RefusalCode.REFUSAL_CODE_POLICY_DENIED);
      expect(answer.httpStatus).toBe(0);
    }
    expect(await readData('keep-me')).toEqual({ k: 'v' });
    expect(
      (await apps.readNamespacedDeployment({ name: 'web', namespace: ns.name })).metadata
        ?.generation,
    ).toBe(webGeneration);
    expect(
      (await core.readNamespacedConfigMap({ name: 'app-elsewhere', namespace: other.name })).data,
    ).toEqual({ a: '1' });
  });

  it("gives RBAC_DENIED with the API server's real 403 when rbac.write is off", async () => {
    const answer = await noRbac.applyMutation(
      noRbac.mutation({
        verb: 'create',
        namespace: ns.name,
        name: 'app-2',
        body: configMap('app-2', { a: '1' }),
      }),
    );
    expect(answer.refusal?.code).toBe(RefusalCode.REFUSAL_CODE_RBAC_DENIED);
    expect(answer.httpStatus).toBe(403);
    expect(answer.refusal?.reason).toContain('forbidden');
    expect(await exists('app-2')).toBe(false);
  });

  it('refuses unsigned, mismatched, replayed, gate-off and malformed requests', async () => {
    const base = {
      verb: 'create',
      namespace: ns.name,
      name: 'app-3',
      body: configMap('app-3', { a: '1' }),
    };
    const unsigned = { ...executor.mutation(base), command: { jws: '' } };
    expect((await executor.applyMutation(unsigned)).refusal?.code).toBe(
      RefusalCode.REFUSAL_CODE_SIGNATURE_INVALID,
    );
    const otherName = executor.mutation(base, {
      target: {
        kind: 'resource',
        namespace: ns.name,
        name: 'app-other',
        container: '',
        resource: 'configmaps',
      },
    });
    expect((await executor.applyMutation(otherName)).refusal?.code).toBe(
      RefusalCode.REFUSAL_CODE_SIGNATURE_MISMATCH,
    );
    const otherResource = executor.mutation(base, {
      target: {
        kind: 'resource',
        namespace: ns.name,
        name: 'app-3',
        container: '',
        resource: 'secrets',
      },
    });
    expect((await executor.applyMutation(otherResource)).refusal?.code).toBe(
      RefusalCode.REFUSAL_CODE_SIGNATURE_MISMATCH,
    );
    expect((await gateOff.applyMutation(gateOff.mutation(base))).refusal?.code).toBe(
      RefusalCode.REFUSAL_CODE_GATE_DISABLED,
    );
    // The body must write the object the signature and rules name.
    const smuggled = executor.mutation({ ...base, body: configMap('keep-me', { k: 'stolen' }) });
    expect((await executor.applyMutation(smuggled)).refusal?.code).toBe(
      RefusalCode.REFUSAL_CODE_INVALID_REQUEST,
    );
    const traversal = executor.mutation({
      ...base,
      verb: 'delete',
      name: '../../nodes/x',
      body: Buffer.alloc(0),
    });
    expect((await executor.applyMutation(traversal)).refusal?.code).toBe(
      RefusalCode.REFUSAL_CODE_INVALID_REQUEST,
    );
    expect(await exists('app-3')).toBe(false);
    const good = executor.mutation(base);
    expect((await executor.applyMutation(good)).status).toBe('Success');
    expect((await executor.applyMutation(good)).refusal?.code).toBe(
      RefusalCode.REFUSAL_CODE_SIGNATURE_REPLAYED,
    );
  });
});
