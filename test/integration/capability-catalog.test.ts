// The capability catalog against the real API server: discovery, the fingerprint, the
// collector's own access reviews, the policy's verdicts, an aggregated API that fails discovery,
// and the executor's side asked over a real Unix socket from a real executor server whose
// access reviews run on its own (narrow) identity.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  ApiextensionsV1Api,
  CoreV1Api,
  KubeConfig,
  RbacAuthorizationV1Api,
} from '@kubernetes/client-node';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { BufferItem } from '../../collector/buffer/types.js';
import { createCapabilityCatalog } from '../../collector/catalog/capability-catalog.js';
import { discoverResources, type DiscoveredResource } from '../../collector/catalog/discovery.js';
import { createExecutorClient } from '../../collector/executor-client/executor-client.js';
import { createKubeRest, type KubeRest } from '../../collector/query/kube-rest.js';
import { compileQueryPolicy } from '../../collector/query/policy.js';
import { createGateAccessReporter } from '../../executor/catalog/gate-access.js';
import { createCommandGuard } from '../../executor/guard/authorize-command.js';
import { createCommandVerifier } from '../../executor/guard/verify-command.js';
import { createExecutorServer } from '../../executor/server/executor-server.js';
import { AgentMessage, ExecutorState, Gate, type ResourceCatalog } from '../../proto/index.js';
import { systemClock } from '../../shared/clock.js';
import { FakeClock } from '../helpers/fake-clock.js';
import { crdManifest, registerDeadApiService } from '../helpers/test-apis.js';
import { startHoldingProxy } from '../helpers/holding-proxy.js';
import { load } from '../../shared/config/load-for-test.js';
import {
  createTestNamespace,
  eventually,
  loadKubeConfig,
  type TestNamespace,
} from '../helpers/kube.js';

const silent = pino({ level: 'silent' });
let kc: KubeConfig;
let ns: TestNamespace;
const cleanups: (() => Promise<unknown>)[] = [];

beforeAll(async () => {
  kc = loadKubeConfig(inject('kubeconfigPath'));
  ns = await createTestNamespace(kc, 'catalog');
});

afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
  await ns.delete();
});

function collectorCatalog(yaml: string, executorSocket?: string) {
  const rest = createKubeRest(kc);
  const items: BufferItem[] = [];
  const executor = executorSocket === undefined ? undefined : createExecutorClient(executorSocket);
  const catalog = createCapabilityCatalog(
    { clusterId: 'c', agentId: 'a' },
    {
      rest,
      policy: compileQueryPolicy(load(yaml).config.query),
      sink: { enqueue: (item) => items.push(item) },
      logger: silent,
      clock: systemClock,
      ...(executor === undefined ? {} : { executor }),
    },
  );
  cleanups.push(async () => {
    await catalog.close();
    executor?.close();
    rest.close();
  });
  /** The catalogs published, decoded from what went into the buffer. */
  const published = (): ResourceCatalog[] =>
    items.map((item) => {
      const message = AgentMessage.decode(item.payload);
      if (message.payload?.$case !== 'catalog') throw new Error('not a catalog');
      return message.payload.value;
    });
  return { catalog, published };
}

const entry = (catalog: ResourceCatalog | undefined, group: string, resource: string) =>
  catalog?.entries.find((e) => e.group === group && e.resource === resource);

describe('capability catalog', () => {
  it('on a fake clock: discovers every 5 minutes, probes 8 at a time, publishes on change and hourly', async () => {
    // First in the file, so no CRD or APIService of another test comes or goes meanwhile; and
    // the resource set the API server serves must have settled (a CRD an earlier file deleted
    // can leave discovery a moment later): two discoveries a second apart agree.
    const settledRest = createKubeRest(kc);
    try {
      await eventually(
        'a settled resource set',
        async () => {
          const before = await discoverResources(settledRest, AbortSignal.timeout(20_000));
          await new Promise((resolve) => setTimeout(resolve, 1000));
          const after = await discoverResources(settledRest, AbortSignal.timeout(20_000));
          return before.fingerprint === after.fingerprint &&
            before.failedGroups.join() === after.failedGroups.join()
            ? true
            : undefined;
        },
        { timeoutMs: 60_000, intervalMs: 100 },
      );
    } finally {
      settledRest.close();
    }
    const core = kc.makeApiClient(CoreV1Api);
    await core.createNamespacedServiceAccount({
      namespace: ns.name,
      body: { metadata: { name: 'catalog-clock' } },
    });
    const token = await core.createNamespacedServiceAccountToken({
      name: 'catalog-clock',
      namespace: ns.name,
      body: { spec: { audiences: [], expirationSeconds: 600 } },
    });
    const proxy = await startHoldingProxy(kc);
    cleanups.push(() => proxy.close());
    // What reaches the API server, counted at the proxy: a discovery round reads /apis once.
    const discoveries = proxy.tally((method, path) => method === 'GET' && path === '/apis');
    // Aggregated discovery (discovery.ts): /api and /apis hold every group version's resources,
    // so a round reads those two and no group version's own path.
    const discoveryReads = proxy.tally(
      (method, path) => method === 'GET' && /^\/apis?(\/|$)/.test(path),
    );
    const reviews = proxy.tally(
      (method, path) =>
        method === 'POST' && path === '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews',
    );
    const rest = createKubeRest(proxy.kubeConfigFor(token.status?.token ?? ''));
    const clock = new FakeClock();
    const items: BufferItem[] = [];
    const catalog = createCapabilityCatalog(
      { clusterId: 'c', agentId: 'a' },
      {
        rest,
        policy: compileQueryPolicy(load('query: {rules: [{resources: ["*"]}]}').config.query),
        sink: { enqueue: (item) => items.push(item) },
        logger: silent,
        clock,
      },
    );
    cleanups.push(async () => {
      await catalog.close();
      rest.close();
    });
    const FIVE_MINUTES = 5 * 60_000;
    /** Resolves when the round the clock just woke has ended (the loop asks for its next sleep). */
    const roundEnded = () => clock.waitForSleep(() => true);

    // The first round sweeps every resource. It opens with two reviews of every resource in
    // every group ("*": list and watch, access-probe.ts), which this identity is refused; held,
    // they are the only two at the API server: nothing else goes until they are answered.
    reviews.hold();
    const firstRound = roundEnded();
    await catalog.start(new AbortController().signal);
    await eventually(
      'the two reviews of every resource held at the proxy',
      () => Promise.resolve(reviews.held() === 2 || undefined),
      { timeoutMs: 30_000, intervalMs: 20 },
    );
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(reviews.held()).toBe(2);
    // Then one review per resource and verb: held again, the catalog never has more than 8 at
    // the API server.
    reviews.release();
    reviews.hold();
    await eventually(
      '8 reviews held at the proxy',
      () => Promise.resolve(reviews.held() === 8 || undefined),
      {
        timeoutMs: 30_000,
        intervalMs: 20,
      },
    );
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(reviews.held()).toBe(8);
    reviews.release();
    expect(await firstRound).toBe(FIVE_MINUTES);
    expect(reviews.maxInFlight()).toBe(8);
    const resources = catalog.last()?.entries.length ?? 0;
    expect(resources).toBeGreaterThan(8);
    // A sweep: the two reviews of every resource, then list for each resource, and watch for
    // those it may list.
    const perSweep = 2 + resources + (catalog.last()?.entries.filter((e) => e.canList).length ?? 0);
    expect(reviews.seen()).toBe(perSweep);
    expect(catalog.published()).toBe(1);
    expect(discoveries.seen()).toBe(1);
    expect(discoveryReads.seen()).toBe(2);
    expect(clock.pending()).toEqual([FIVE_MINUTES]);

    // One millisecond short of 5 minutes: no round.
    clock.advance(FIVE_MINUTES - 1);
    expect(clock.pending()).toEqual([FIVE_MINUTES]);
    expect(discoveries.seen()).toBe(1);

    // Every 5 minutes a discovery; nothing changed, so nothing is published or probed until the
    // sweep is an hour old: the 12th round probes every resource again and publishes.
    const firstFingerprint = catalog.last()?.fingerprint;
    let ms = FIVE_MINUTES - 1;
    for (let round = 1; round <= 12; round++) {
      // The woken sleep leaves pending at once; the next is asked for when the round ends.
      clock.advance(round === 1 ? 1 : FIVE_MINUTES);
      ms += round === 1 ? 1 : FIVE_MINUTES;
      expect(await roundEnded()).toBe(FIVE_MINUTES);
      expect(discoveries.seen(), `round ${String(round)}`).toBe(1 + round);
      expect(discoveryReads.seen(), `round ${String(round)}`).toBe(2 * (1 + round));
      const hourly = ms >= 60 * 60_000;
      expect(
        [catalog.published(), reviews.seen()],
        `round ${String(round)} at ${String(ms)} ms`,
      ).toEqual(hourly ? [2, 2 * perSweep] : [1, perSweep]);
      expect(catalog.last()?.fingerprint).toBe(firstFingerprint);
    }
    expect(clock.sleeps.every((sleep) => sleep === FIVE_MINUTES)).toBe(true);

    // A change is published at the next round, without waiting for the hour.
    const group = 'clock.kubexa.test';
    const ext = kc.makeApiClient(ApiextensionsV1Api);
    await ext.createCustomResourceDefinition({
      body: crdManifest({ group, plural: 'ticks', kind: 'Tick', scope: 'Cluster' }),
    });
    cleanups.push(() => ext.deleteCustomResourceDefinition({ name: `ticks.${group}` }));
    // Served (so discovery lists it) before the clock moves: then one 5-minute round publishes it.
    const admin = createKubeRest(kc);
    cleanups.push(() => {
      admin.close();
      return Promise.resolve();
    });
    await eventually(
      'the CRD served',
      async () => {
        const served = await admin.request({
          method: 'GET',
          path: `/apis/${group}/v1`,
          maxBodyBytes: 1 << 20,
          signal: AbortSignal.timeout(10_000),
        });
        return served.status === 200 && served.body.includes('"ticks"') ? true : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 200 },
    );
    // As the catalog's round will see it: the aggregated discovery document, rebuilt apart from
    // the plain group list, may list the new resource a moment later.
    await eventually(
      'the CRD in aggregated discovery',
      async () => {
        const found = await discoverResources(admin, AbortSignal.timeout(10_000));
        return found.resources.some((r) => r.group === group && r.resource === 'ticks')
          ? true
          : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 200 },
    );
    clock.advance(FIVE_MINUTES);
    expect(await roundEnded()).toBe(FIVE_MINUTES);
    expect(catalog.published()).toBe(3);
    expect(entry(catalog.last(), group, 'ticks')).toBeDefined();
    expect(catalog.last()?.fingerprint).not.toBe(firstFingerprint);
    expect(items).toHaveLength(3);
  });

  it('publishes RBAC and policy verdicts, and a new catalog when a CRD changes the resource set', async () => {
    const { catalog, published } = collectorCatalog(
      'query: {rules: [{resources: [configmaps], verbs: [list]}, {resources: [pods]}]}',
    );
    const signal = new AbortController().signal;
    await catalog.refresh(signal);
    const first = catalog.last();
    expect(first?.fingerprint).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(entry(first, '', 'configmaps')).toMatchObject({
      version: 'v1',
      kind: 'ConfigMap',
      namespaced: true,
      canList: true,
      canWatch: true,
      probeFailed: false,
      policyList: true,
      policyGet: false,
    });
    expect(entry(first, '', 'pods')).toMatchObject({ policyList: true, policyGet: true });
    expect(entry(first, '', 'secrets')).toMatchObject({ canList: true, policyList: false });
    expect(entry(first, 'apps', 'deployments')?.version).toBe('v1');
    // Nothing changed: nothing published.
    await catalog.refresh(signal);
    expect(published()).toHaveLength(1);

    const group = 'catalog.kubexa.test';
    const ext = kc.makeApiClient(ApiextensionsV1Api);
    await ext.createCustomResourceDefinition({
      body: crdManifest({ group, plural: 'gadgets', kind: 'Gadget', scope: 'Cluster' }),
    });
    cleanups.push(() => ext.deleteCustomResourceDefinition({ name: `gadgets.${group}` }));
    const second = await eventually(
      'the CRD in a new catalog',
      async () => {
        await catalog.refresh(signal);
        return entry(catalog.last(), group, 'gadgets') === undefined ? undefined : catalog.last();
      },
      { timeoutMs: 30_000, intervalMs: 500 },
    );
    expect(second.fingerprint).not.toBe(first?.fingerprint);
    expect(entry(second, group, 'gadgets')).toMatchObject({
      namespaced: false,
      canList: true,
      policyList: false,
    });
    // Between the two, the API server may list a new group before it serves its resources
    // (this test's or another file's on the shared cluster): discovery then reports that group
    // version failed, as client-go does for a 404, and that change is published under the same
    // resource set's fingerprint. What may never come between is a catalog that changed nothing.
    const catalogs = published();
    expect(catalogs[0]?.fingerprint).toBe(first?.fingerprint);
    expect(catalogs.at(-1)?.fingerprint).toBe(second.fingerprint);
    for (const [index, catalog] of catalogs.entries()) {
      const before = catalogs[index - 1];
      if (before === undefined) continue;
      const changed =
        catalog.fingerprint !== before.fingerprint ||
        catalog.failedGroups.join('\n') !== before.failedGroups.join('\n');
      expect(changed, `catalog ${index} repeats the one before it`).toBe(true);
    }
  });

  it('lists an aggregated API whose service is gone in failed_groups and keeps the rest', async () => {
    const group = 'dead.kubexa.test';
    cleanups.push(await registerDeadApiService(kc, ns.name, group));
    const { catalog } = collectorCatalog('query: {rules: [{resources: ["*"]}]}');
    const withFailure = await eventually(
      'the dead group in failed_groups',
      async () => {
        await catalog.refresh(new AbortController().signal);
        const last = catalog.last();
        return last?.failedGroups.includes(`${group}/v1`) === true ? last : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 1000 },
    );
    expect(entry(withFailure, '', 'configmaps')).toMatchObject({
      policyList: true,
      policyGet: true,
    });

    // The same discovery from the plain lists, a read per group version (what a server without
    // aggregated discovery answers): the aggregator's Stale group version is the same failed
    // group as the 503 of its own path, and every resource, version and kind agrees. Retried
    // while another file's CRD comes or goes between the two reads.
    const rest = createKubeRest(kc);
    cleanups.push(() => {
      rest.close();
      return Promise.resolve();
    });
    let legacyReads = 0;
    const plainLists: KubeRest = {
      request: (request) => {
        legacyReads++;
        return rest.request({ ...request, accept: 'application/json' });
      },
      close: () => undefined,
    };
    // And a strict proxy that refuses the aggregated document's media type (406): that path is
    // asked again for the plain list.
    const strictProxy: KubeRest = {
      request: (request) =>
        request.accept?.includes('apidiscovery.k8s.io') === true
          ? Promise.resolve({
              status: 406,
              contentType: 'text/plain',
              body: Buffer.from('not acceptable'),
            })
          : rest.request(request),
      close: () => undefined,
    };
    const [aggregated, legacy, refused] = await eventually(
      'aggregated and per-group-version discovery agree',
      async () => {
        const signal = AbortSignal.timeout(20_000);
        legacyReads = 0;
        const all = [
          await discoverResources(rest, signal),
          await discoverResources(plainLists, signal),
          await discoverResources(strictProxy, signal),
        ] as const;
        const key = (d: (typeof all)[number]) => `${d.fingerprint} ${d.failedGroups.join()}`;
        return key(all[0]) === key(all[1]) && key(all[1]) === key(all[2]) ? all : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 500 },
    );
    expect(refused.resources).toEqual(legacy.resources);
    // The same resources; within a group version the aggregated document lists them by name,
    // the plain list in the server's own order.
    const byKey = (resources: readonly DiscoveredResource[]) =>
      [...resources].sort((a, b) =>
        `${a.group}/${a.resource}`.localeCompare(`${b.group}/${b.resource}`),
      );
    expect(byKey(legacy.resources)).toEqual(byKey(aggregated.resources));
    expect(legacy.failedGroups).toContain(`${group}/v1`);
    expect(aggregated.failedGroups).toEqual(legacy.failedGroups);
    // The plain lists took /api, /apis and a read per group version.
    expect(legacyReads).toBeGreaterThan(10);
  });

  it("shows the executor side: off without an executor, gates off, and the executor's own reviews for a gate on", async () => {
    // The executor's identity: may get pods, may not exec into them.
    const core = kc.makeApiClient(CoreV1Api);
    const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
    await core.createNamespacedServiceAccount({
      namespace: ns.name,
      body: { metadata: { name: 'executor' } },
    });
    const roleName = `${ns.name}-pod-getter`;
    await rbac.createClusterRole({
      body: {
        metadata: { name: roleName },
        rules: [{ apiGroups: [''], resources: ['pods'], verbs: ['get'] }],
      },
    });
    cleanups.push(() => rbac.deleteClusterRole({ name: roleName }));
    await rbac.createClusterRoleBinding({
      body: {
        metadata: { name: roleName },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: roleName },
        subjects: [{ kind: 'ServiceAccount', name: 'executor', namespace: ns.name }],
      },
    });
    cleanups.push(() => rbac.deleteClusterRoleBinding({ name: roleName }));
    const token = await core.createNamespacedServiceAccountToken({
      name: 'executor',
      namespace: ns.name,
      body: { spec: { audiences: [], expirationSeconds: 600 } },
    });
    const cluster = kc.getCurrentCluster();
    if (cluster === null || token.status === undefined) throw new Error('no cluster or token');
    const executorKube = new KubeConfig();
    executorKube.loadFromOptions({
      clusters: [cluster],
      users: [{ name: 'executor', token: token.status.token }],
      contexts: [{ name: 'executor', cluster: cluster.name, user: 'executor' }],
      currentContext: 'executor',
    });

    const startExecutor = async (yaml: string, gates: Gate[]) => {
      const dir = await mkdtemp(join(tmpdir(), 'kubexa-catalog-'));
      const socketPath = join(dir, 'executor', 'executor.sock');
      const config = load(yaml, { role: 'executor' }).config;
      const server = createExecutorServer(
        {
          socketPath,
          ownUid: process.getuid?.() ?? -1,
          enabledGates: gates,
          guard: createCommandGuard(
            createCommandVerifier({ keys: new Map(), clock: systemClock }),
            new Set(),
          ),
          gateAccess: createGateAccessReporter(config, {
            kube: executorKube,
            homeNamespace: ns.name,
          }).report,
          shutdownTimeoutMs: 2000,
        },
        { logger: silent },
      );
      await server.start(new AbortController().signal);
      cleanups.push(async () => {
        await server.close();
        await rm(dir, { recursive: true, force: true });
      });
      return socketPath;
    };

    const none = collectorCatalog('query: {}');
    await none.catalog.refresh(new AbortController().signal);
    expect(none.catalog.last()?.executor?.state).toBe(ExecutorState.EXECUTOR_STATE_NOT_DEPLOYED);
    expect(none.catalog.last()?.executor?.capabilities.map((c) => [c.name, c.enabled])).toEqual([
      ['pod_exec', false],
      ['node_shell', false],
      ['node_ops', false],
      ['mutate', false],
    ]);

    const offSocket = await startExecutor('mutate: {enabled: false}', []);
    const off = collectorCatalog('query: {}', offSocket);
    await off.catalog.refresh(new AbortController().signal);
    const offSide = off.catalog.last()?.executor;
    expect(offSide?.state).toBe(ExecutorState.EXECUTOR_STATE_ANSWERED);
    expect(offSide?.capabilities.find((c) => c.name === 'pod_exec')).toEqual({
      name: 'pod_exec',
      enabled: false,
      rbacAllowed: false,
      checks: [],
    });

    const onSocket = await startExecutor(
      'exec: {pod: {enabled: true, rules: [{namespace: "*"}]}}',
      [Gate.GATE_POD_EXEC],
    );
    const on = collectorCatalog('query: {}', onSocket);
    await on.catalog.refresh(new AbortController().signal);
    const podExec = on.catalog.last()?.executor?.capabilities.find((c) => c.name === 'pod_exec');
    expect(podExec?.enabled).toBe(true);
    expect(podExec?.rbacAllowed).toBe(false);
    expect(
      podExec?.checks.map((c) => [c.resource, c.subresource, c.verb, c.allowed, c.failed]),
    ).toEqual([
      ['pods', '', 'get', true, false],
      ['pods', 'exec', 'create', false, false],
    ]);

    const gone = collectorCatalog('query: {}', join(tmpdir(), 'kubexa-no-such-executor.sock'));
    await gone.catalog.refresh(new AbortController().signal);
    expect(gone.catalog.last()?.executor).toMatchObject({
      state: ExecutorState.EXECUTOR_STATE_UNREACHABLE,
      error: expect.stringContaining('executor did not answer') as unknown,
    });
  });
});
