// The metrics source against the real metrics-server of the test harness: kwok reports each
// container's usage from the pod's kwok.x-k8s.io/usage-* annotations, metrics-server serves it
// as PodMetrics and NodeMetrics, and the source must send one MetricsEvent per pod (containers
// summed exactly) and per node. Then the metrics.k8s.io APIService is deleted mid-run: one
// warning, no events, no crash, and events again once it is back.
import {
  ApiregistrationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  type V1APIService,
} from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { wireMetricsSource } from '../../collector/sources/metrics/wiring.js';
import { AgentMessage, type MetricsEvent } from '../../proto/index.js';
import { systemClock } from '../../shared/clock.js';
import { captureLogs } from '../helpers/gateway-harness.js';
import {
  createTestNamespace,
  eventually,
  loadKubeConfig,
  type TestNamespace,
} from '../helpers/kube.js';
import { loadConfig } from '../../shared/config/load-config.js';
import { seriesValue } from '../helpers/prom-series.js';

const kc = loadKubeConfig(inject('kubeconfigPath'));
const core = kc.makeApiClient(CoreV1Api);
const registration = kc.makeApiClient(ApiregistrationV1Api);
const custom = kc.makeApiClient(CustomObjectsApi);
const API_SERVICE = 'v1beta1.metrics.k8s.io';
let ns: TestNamespace;

beforeAll(async () => {
  ns = await createTestNamespace(kc, 'kube-metrics');
});

afterAll(async () => {
  await ns.delete();
});

/** Nanocores from a metrics-server CPU quantity, computed independently of the collector. */
function testNanocores(text: string): bigint {
  const match = /^(\d+)(n|u|m|)$/.exec(text);
  if (match === null) throw new Error(`unexpected CPU quantity ${text}`);
  const factor = { n: 1n, u: 1000n, m: 1_000_000n, '': 1_000_000_000n }[match[2] as 'n'];
  return BigInt(match[1] ?? '0') * factor;
}

/** Bytes from a metrics-server memory quantity. */
function testBytes(text: string): bigint {
  const match = /^(\d+)(Ki|Mi|Gi|)$/.exec(text);
  if (match === null) throw new Error(`unexpected memory quantity ${text}`);
  const factor = { Ki: 1024n, Mi: 1024n ** 2n, Gi: 1024n ** 3n, '': 1n }[match[2] as 'Ki'];
  return BigInt(match[1] ?? '0') * factor;
}

interface UsageList {
  items: {
    metadata: { name: string };
    timestamp: string;
    usage: { cpu: string; memory: string };
  }[];
}

function metricsConfig(namespace: string) {
  const fileText = [
    'gateway: { address: "127.0.0.1:1", tls: false }',
    'collect:',
    '  metrics:',
    '    rules:',
    `      - { id: shop, namespace: ${namespace}, resources: [pods], pod_interval: 2s }`,
    '      - { id: cluster, resources: [nodes], node_names: ["kwok-node-*"], node_interval: 2s }',
    '',
  ].join('\n');
  return loadConfig({ fileText, env: { KUBEXA_TENANT_TOKEN: 't' } }).config.collect.metrics;
}

function startSource() {
  const events: MetricsEvent[] = [];
  const logs = captureLogs();
  const registry = new Registry();
  const source = wireMetricsSource(
    metricsConfig(ns.name),
    { clusterId: 'c', agentId: 'a' },
    {
      logger: logs.logger,
      clock: systemClock,
      kube: kc,
      registry,
      sink: {
        enqueue(item) {
          const message = AgentMessage.decode(item.payload);
          if (message.payload?.$case === 'kubeMetrics') events.push(message.payload.value);
        },
      },
    },
  );
  return { events, logs, registry, source };
}

describe('metrics.k8s.io through the real metrics-server', () => {
  it('sends one event per pod with its containers summed, and one per kwok node', async () => {
    await core.createNamespacedPod({
      namespace: ns.name,
      body: {
        metadata: {
          name: 'measured',
          annotations: { 'kwok.x-k8s.io/usage-cpu': '250m', 'kwok.x-k8s.io/usage-memory': '64Mi' },
        },
        spec: {
          containers: [
            { name: 'app', image: 'registry.invalid/app:1' },
            { name: 'sidecar', image: 'registry.invalid/sidecar:1' },
          ],
        },
      },
    });
    const { events, registry, source } = startSource();
    await source.start(new AbortController().signal);
    try {
      // The PodMetrics as the API serves it, read by the test; then the event of the same window.
      const { expected, event } = await eventually(
        'a pod event matching a PodMetrics read',
        async () => {
          const list = (await custom.listNamespacedCustomObject({
            group: 'metrics.k8s.io',
            version: 'v1beta1',
            namespace: ns.name,
            plural: 'pods',
          })) as {
            items: {
              metadata: { name: string };
              timestamp: string;
              containers: { usage: { cpu: string; memory: string } }[];
            }[];
          };
          const item = list.items.find((i) => i.metadata.name === 'measured');
          if (item === undefined || item.containers.length < 2) return undefined;
          const match = events.find(
            (e) => e.name === 'measured' && e.timestamp === String(Date.parse(item.timestamp)),
          );
          return match === undefined ? undefined : { expected: item, event: match };
        },
        { timeoutMs: 120_000, intervalMs: 1000 },
      );
      const cpu = expected.containers.reduce((sum, c) => sum + testNanocores(c.usage.cpu), 0n);
      expect(event).toMatchObject({
        resourceType: 1,
        namespace: ns.name,
        name: 'measured',
        cpuNanocores: cpu.toString(),
        // 64Mi per container, two containers.
        memoryBytes: String(2 * 64 * 1024 * 1024),
      });
      expect(cpu).toBeGreaterThan(0n);
      expect(event.windowSeconds).toBeGreaterThanOrEqual(1);

      // kwok reports a node's usage as the sum of its pods', so nodes with pods have NodeMetrics.
      const node = await eventually(
        'a node event matching a NodeMetrics read',
        async () => {
          const list = (await custom.listClusterCustomObject({
            group: 'metrics.k8s.io',
            version: 'v1beta1',
            plural: 'nodes',
          })) as UsageList;
          for (const item of list.items) {
            const match = events.find(
              (e) =>
                e.resourceType === 2 &&
                e.name === item.metadata.name &&
                e.timestamp === String(Date.parse(item.timestamp)),
            );
            if (match !== undefined) return { item, match };
          }
          return undefined;
        },
        { timeoutMs: 60_000, intervalMs: 1000 },
      );
      expect(node.match).toMatchObject({
        namespace: '',
        cpuNanocores: testNanocores(node.item.usage.cpu).toString(),
        memoryBytes: testBytes(node.item.usage.memory).toString(),
      });
      expect(node.item.metadata.name).toMatch(/^kwok-node-\d$/);

      // The self-metrics of both rules' scrapes, on the real registry the source registered.
      for (const [target, sent] of [
        ['pods/shop', events.filter((e) => e.resourceType === 1).length],
        ['nodes/cluster', events.filter((e) => e.resourceType === 2).length],
      ] as const) {
        const series = { source: 'kubernetes', target };
        const value = (name: string, labels = {}) =>
          seriesValue(registry, `kubexa_collector_metrics_${name}`, { ...series, ...labels });
        const successes = (await value('scrapes_total', { status: 'success' })) ?? 0;
        expect(successes, target).toBeGreaterThanOrEqual(1);
        expect(await value('scrape_duration_seconds_count'), target).toBeGreaterThanOrEqual(
          successes,
        );
        // One sample per event handed to the buffer (read after the events: more may follow).
        expect(await value('samples_total'), target).toBeGreaterThanOrEqual(sent);
        const lastSuccess = (await value('last_success_timestamp_seconds')) ?? 0;
        expect(Date.now() / 1000 - lastSuccess, target).toBeLessThan(60);
      }
    } finally {
      await source.close();
    }
  });

  it('warns once when the APIService is deleted mid-run, and recovers when it returns', async () => {
    const { events, logs, registry, source } = startSource();
    await source.start(new AbortController().signal);
    const saved = await registration.readAPIService({ name: API_SERVICE });
    let restored = false;
    const restore = async () => {
      if (restored) return;
      restored = true;
      const body: V1APIService = {
        apiVersion: 'apiregistration.k8s.io/v1',
        kind: 'APIService',
        metadata: { name: API_SERVICE, labels: saved.metadata?.labels ?? {} },
        spec: saved.spec!,
      };
      await registration.createAPIService({ body });
    };
    try {
      await eventually(
        'the first events',
        () => Promise.resolve(events.length > 0 ? true : undefined),
        {
          timeoutMs: 60_000,
        },
      );
      await registration.deleteAPIService({ name: API_SERVICE });
      await eventually(
        'the unavailable warning',
        () =>
          Promise.resolve(
            logs.lines.some((l) => l.msg.startsWith('metrics.k8s.io is not served'))
              ? true
              : undefined,
          ),
        { timeoutMs: 30_000 },
      );
      expect(source.kubeMetricsAvailability()).toBe('unavailable');
      expect(
        await registry.getSingleMetricAsString('kubexa_collector_metrics_api_available'),
      ).toMatch(/kubexa_collector_metrics_api_available 0$/m);
      // Both loops (pods and nodes) keep retrying; the warning stays one line.
      const before = events.length;
      await new Promise((resolve) => setTimeout(resolve, 35_000));
      expect(
        logs.lines.filter((l) => l.msg.startsWith('metrics.k8s.io is not served')),
      ).toHaveLength(1);
      const scrapes = await registry.getSingleMetricAsString(
        'kubexa_collector_metrics_scrapes_total',
      );
      expect(scrapes).toMatch(/status="unavailable"\} [2-9]/);
      // An event may have been in flight when the APIService went; none after.
      expect(events.length - before).toBeLessThanOrEqual(2);

      await restore();
      const resumedFrom = events.length;
      await eventually(
        'events after the APIService returned',
        () => Promise.resolve(events.length > resumedFrom ? true : undefined),
        { timeoutMs: 90_000, intervalMs: 500 },
      );
      expect(source.kubeMetricsAvailability()).toBe('available');
      expect(logs.lines.some((l) => l.msg === 'metrics.k8s.io scrapes succeed again')).toBe(true);
      expect(logs.lines.filter((l) => l.level >= 50)).toEqual([]);
    } finally {
      await restore().catch(() => undefined);
      await source.close();
    }
  });
});
