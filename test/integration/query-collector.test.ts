// The live query in the wired collector (createCollector: its gateway stream, its /metrics), with
// the demo gateway as the gateway and the real API server behind a TLS-terminating proxy the
// test owns (test/helpers/holding-proxy.ts). The proxy, not the collector, counts how many
// queries reach the API server at once, and holds them there: at most 4 run, 8 more wait, the
// 13th is refused at once, a refusal by policy never arrives, and heartbeats keep arriving while
// 12 queries are held. Then the query self-metrics are read from /metrics and compared with what
// the gateway received.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api, RbacAuthorizationV1Api } from '@kubernetes/client-node';
import { pino } from 'pino';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import { createCollector } from '../../collector/collector.js';
import { DemoGateway } from '../../demo-gateway/demo-gateway.js';
import {
  ConfigUpdate,
  QueryErrorCode,
  QueryVerb,
  QueryView,
  ResourceQuery,
  type ResourceQueryResult,
} from '../../proto/index.js';
import { loadConfig } from '../../shared/config/load-config.js';
import { startServices } from '../../shared/lifecycle/service.js';
import { captureLogs } from '../helpers/gateway-harness.js';
import { startHoldingProxy } from '../helpers/holding-proxy.js';
import { createTestNamespace, eventually, loadKubeConfig, uniqueName } from '../helpers/kube.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** One sample of a Prometheus text exposition; undefined when absent. */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

const CONFIGMAPS = { group: '', version: 'v1', resource: 'configmaps' };
const { QUERY_VERB_LIST: LIST, QUERY_VERB_GET: GET } = QueryVerb;
const { QUERY_VIEW_TABLE: TABLE } = QueryView;

describe('live query in the wired collector', () => {
  it('runs at most 4 at the API server, queues 8, refuses the 13th at once, keeps heartbeats flowing, and /metrics says what happened', async () => {
    const kc = loadKubeConfig(inject('kubeconfigPath'));
    const core = kc.makeApiClient(CoreV1Api);
    const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
    const ns = await createTestNamespace(kc, 'query-wired');
    cleanups.push(() => ns.delete());
    for (const name of ['cm-1', 'cm-2', 'cm-3']) {
      await core.createNamespacedConfigMap({
        namespace: ns.name,
        body: { metadata: { name }, data: { key: name } },
      });
    }
    // The collector's identity: a ServiceAccount token (the proxy passes bearer tokens on) with
    // read access to the namespace's ConfigMaps.
    await core.createNamespacedServiceAccount({
      namespace: ns.name,
      body: { metadata: { name: 'collector' } },
    });
    await rbac.createNamespacedRole({
      namespace: ns.name,
      body: {
        metadata: { name: 'configmap-reader' },
        rules: [{ apiGroups: [''], resources: ['configmaps'], verbs: ['get', 'list'] }],
      },
    });
    await rbac.createNamespacedRoleBinding({
      namespace: ns.name,
      body: {
        metadata: { name: 'collector' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'configmap-reader' },
        subjects: [{ kind: 'ServiceAccount', name: 'collector', namespace: ns.name }],
      },
    });
    const minted = await core.createNamespacedServiceAccountToken({
      name: 'collector',
      namespace: ns.name,
      body: { spec: { audiences: [], expirationSeconds: 600 } },
    });
    const proxy = await startHoldingProxy(kc);
    cleanups.push(() => proxy.close());
    const configMapReads = proxy.tally(
      (method, path) =>
        method === 'GET' && path.startsWith(`/api/v1/namespaces/${ns.name}/configmaps`),
    );
    // A namespace the policy refuses: nothing for it may reach the API server.
    const forbidden = uniqueName('query-other');
    const forbiddenReads = proxy.tally((_, path) => path.includes(`/namespaces/${forbidden}/`));
    const everything = proxy.tally(() => true);

    const gateway = new DemoGateway({}, { logger: pino({ level: 'silent' }) });
    const gatewayPort = await gateway.listen('127.0.0.1', 0);
    cleanups.push(() => gateway.close());
    const dir = mkdtempSync(join(tmpdir(), 'kubexa-query-wired-'));
    cleanups.push(() => {
      rmSync(dir, { recursive: true, force: true });
    });
    const fileText = [
      'gateway:',
      `  address: 127.0.0.1:${String(gatewayPort)}`,
      '  tls: false',
      'buffer:',
      `  spill_dir: ${JSON.stringify(join(dir, 'spill'))}`,
      'collect:',
      '  logs: { enabled: false }',
      '  state: { enabled: false }',
      '  metrics: { enabled: false }',
      'query:',
      `  rules: [{namespace: "${ns.name}", resources: [configmaps]}]`,
      'observability:',
      '  health_addr: "127.0.0.1:0"',
      '  metrics_addr: "127.0.0.1:0"',
      '',
    ].join('\n');
    const { config } = loadConfig({ fileText, env: { KUBEXA_TENANT_TOKEN: 'query-token' } });
    const logs = captureLogs();
    const collector = createCollector(
      config,
      { clusterId: 'cluster-uid', agentId: 'agent-query-wired' },
      { logger: logs.logger, kube: proxy.kubeConfigFor(minted.status?.token ?? '') },
    );
    const stop = await startServices(collector.services, new AbortController().signal);
    cleanups.push(stop);
    let heartbeats = 0;
    gateway.events.on('message', (message) => {
      if (message.payload?.$case === 'heartbeat') heartbeats++;
    });
    const session = await gateway.waitForSession();
    gateway.sendConfigUpdate(
      session.sessionId,
      ConfigUpdate.fromPartial({ configVersion: 'query-1', config: { heartbeatIntervalSec: 1 } }),
    );
    const ask = (query: Partial<ResourceQuery>): Promise<ResourceQueryResult> =>
      gateway.query(
        session.sessionId,
        ResourceQuery.fromPartial({ queryId: randomUUID(), ref: CONFIGMAPS, ...query }),
      );
    const scrape = async (): Promise<string> =>
      (await fetch(`http://127.0.0.1:${String(collector.health.ports().metrics)}/metrics`)).text();

    // Before the API server turns slow: one of each kind the metrics should tell apart.
    const list = { verb: LIST, namespace: ns.name, timeoutMs: 30_000 };
    const first = await eventually(
      'the Role to take effect',
      async () => {
        const answer = await ask(list);
        return answer.error === undefined ? answer : undefined;
      },
      { timeoutMs: 20_000 },
    );
    const table = await ask({ ...list, view: TABLE });
    expect(table.error).toBeUndefined();
    const get = await ask({ verb: GET, namespace: ns.name, name: 'cm-2' });
    expect(get.error).toBeUndefined();
    const missing = await ask({ verb: GET, namespace: ns.name, name: 'absent' });
    expect(missing.error?.code).toBe(QueryErrorCode.QUERY_ERROR_NOT_FOUND);

    // The proxy now holds every ConfigMap read before it reaches the API server.
    configMapReads.hold();
    configMapReads.resetMax();
    const settled: (ResourceQueryResult | undefined)[] = [];
    const slow = Array.from({ length: 12 }, (_, i) =>
      ask(list).then((answer) => {
        settled[i] = answer;
        return answer;
      }),
    );
    await eventually(
      '4 queries held at the proxy',
      () => Promise.resolve(configMapReads.held() === 4 || undefined),
      { timeoutMs: 20_000, intervalMs: 20 },
    );
    // Other gateway messages are not held up: heartbeats (every second) keep arriving.
    const beatsBefore = heartbeats;
    await eventually(
      'two heartbeats while the 12 queries are held',
      () => Promise.resolve(heartbeats >= beatsBefore + 2 || undefined),
      { timeoutMs: 20_000, intervalMs: 100 },
    );
    // The 13th, while 4 are held at the API server's door and 8 wait in the collector: refused
    // at once (it cannot be waiting for any of the held ones, which never finish meanwhile).
    const thirteenth = await ask(list);
    expect(thirteenth.error?.code).toBe(QueryErrorCode.QUERY_ERROR_RESOURCE_EXHAUSTED);
    expect(thirteenth.error?.message).toBe(
      'too many concurrent queries for this agent (4 running, 8 waiting); retry shortly',
    );
    // The stream is read in order, so the 12 had all arrived before the 13th was refused.
    const heldSince = Date.now();
    // A refusal by policy is answered meanwhile too, and never reaches the API server.
    const denied = await ask({ ...list, namespace: forbidden });
    expect(denied.error?.code).toBe(QueryErrorCode.QUERY_ERROR_POLICY_DENIED);
    // And one more heartbeat, so the 12 have been held a while.
    await eventually(
      'a third heartbeat while the 12 queries are held',
      () => Promise.resolve(heartbeats >= beatsBefore + 3 || undefined),
      { timeoutMs: 20_000, intervalMs: 100 },
    );
    const during = await scrape();
    expect(sample(during, 'kubexa_collector_query_inflight')).toBe(12);
    // Through all that time the collector sent no fifth read: 4 at the API server, no more.
    expect(configMapReads.held()).toBe(4);
    expect(configMapReads.maxInFlight()).toBe(4);
    expect(settled.filter((answer) => answer !== undefined)).toEqual([]);
    const heldMs = Date.now() - heldSince;

    configMapReads.release();
    const answers = await Promise.all(slow);
    expect(answers.map((answer) => answer.error)).toEqual(
      Array.from({ length: 12 }, () => undefined),
    );
    // The 8 that waited went in as slots freed: never more than 4 at once at the proxy.
    expect(configMapReads.maxInFlight()).toBe(4);
    expect(forbiddenReads.seen()).toBe(0);
    // Wait out the last read's bookkeeping at the proxy (its 'close' after the answer).
    await eventually(
      'the proxy to see every read answered',
      () => Promise.resolve(everything.inFlight() === 0 || undefined),
      { timeoutMs: 10_000, intervalMs: 20 },
    );

    // The self-metrics, from /metrics, against what the gateway received.
    const metrics = await scrape();
    const total = (verb: string, resource: string, view: string, outcome: string) =>
      sample(
        metrics,
        `kubexa_collector_query_total{verb="${verb}",resource="${resource}",view="${view}",outcome="${outcome}"}`,
      );
    expect(total('list', 'v1/configmaps', 'full', 'ok')).toBe(13);
    expect(total('list', 'v1/configmaps', 'table', 'ok')).toBe(1);
    expect(total('get', 'v1/configmaps', 'full', 'ok')).toBe(1);
    expect(total('get', 'v1/configmaps', 'full', 'not_found')).toBe(1);
    expect(total('list', 'v1/configmaps', 'full', 'resource_exhausted')).toBe(1);
    expect(total('list', 'other', 'full', 'policy_denied')).toBe(1);
    const series = (name: string, verb: string) =>
      `${name}{verb="${verb}",resource="v1/configmaps"}`;
    // Duration: every answered query observed once (the tries before the Role took effect
    // were answered RBAC_DENIED); the 12 held ones each at least the hold (less 1 ms of rounding).
    const beforeRole = total('list', 'v1/configmaps', 'full', 'rbac_denied') ?? 0;
    expect(sample(metrics, series('kubexa_collector_query_duration_seconds_count', 'list'))).toBe(
      15 + beforeRole,
    );
    expect(sample(metrics, series('kubexa_collector_query_duration_seconds_count', 'get'))).toBe(2);
    expect(
      sample(metrics, series('kubexa_collector_query_duration_seconds_sum', 'list')),
    ).toBeGreaterThanOrEqual((12 * (heldMs - 1)) / 1000);
    // Response bytes: the answered payloads, byte for byte as the gateway received them.
    const listBytes = [first, table, ...answers].reduce((sum, a) => sum + a.payload.length, 0);
    expect(sample(metrics, series('kubexa_collector_query_response_bytes_count', 'list'))).toBe(14);
    expect(sample(metrics, series('kubexa_collector_query_response_bytes_sum', 'list'))).toBe(
      listBytes,
    );
    expect(sample(metrics, series('kubexa_collector_query_response_bytes_sum', 'get'))).toBe(
      get.payload.length,
    );
    expect(sample(metrics, 'kubexa_collector_query_inflight')).toBe(0);
  });
});
