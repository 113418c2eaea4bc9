// Annotation discovery and profiling with real pods on the real node: a busybox pod serving a
// Prometheus page with busybox httpd (prometheus.io/scrape, /port, /path, /scheme), a pod
// running pprof-app (kubexa.io/pprof-port, /pprof-container), and the same annotations on a pod
// the rule's label selector leaves out. The metrics source finds the pods through its pod watch
// and scrapes them directly at their pod IPs (the machine routes the pod CIDR to the node; no
// pods/proxy), and the families and profiles arrive at the demo gateway over a real stream.
import { CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { wireMetricsSource } from '../../collector/sources/metrics/wiring.js';
import type { ProfileEvent, PrometheusMetricsEvent } from '../../proto/index.js';
import { systemClock } from '../../shared/clock.js';
import { load } from '../../shared/config/load-for-test.js';
import { clusterVersions } from '../cluster/cluster.js';
import { REAL_NODE_LABEL, REAL_NODE_TAINT } from '../cluster/node.js';
import { captureLogs, startHarness, type Harness } from '../helpers/gateway-harness.js';
import {
  createTestNamespace,
  eventually,
  loadKubeConfig,
  type TestNamespace,
} from '../helpers/kube.js';
import { decodePprof } from '../helpers/pprof.js';

const kc = loadKubeConfig(inject('kubeconfigPath'));
const core = kc.makeApiClient(CoreV1Api);
const busybox = clusterVersions()['BUSYBOX_IMAGE'] ?? '';
const SELECTED = { 'kubexa.test/scrape': 'yes' };

const PAGE = [
  '# HELP orders_total Orders taken.',
  '# TYPE orders_total counter',
  'orders_total{shop="berlin"} 17',
  '# TYPE queue_depth gauge',
  'queue_depth 3',
  '',
].join('\\n');

let ns: TestNamespace;
let harness: Harness;
const families: PrometheusMetricsEvent[] = [];
const profiles: ProfileEvent[] = [];

/** A pod pinned to the real node from the local busybox image. */
function realNodePod(
  name: string,
  meta: { labels: Record<string, string>; annotations: Record<string, string> },
  command: string[],
  hostDir?: { path: string; mountPath: string },
): V1Pod {
  const { labels, annotations } = meta;
  return {
    metadata: { name, namespace: ns.name, labels, annotations },
    spec: {
      nodeSelector: { [REAL_NODE_LABEL]: 'true' },
      tolerations: [{ key: REAL_NODE_TAINT, operator: 'Exists', effect: 'NoSchedule' }],
      terminationGracePeriodSeconds: 1,
      containers: [
        {
          name: 'main',
          image: busybox,
          imagePullPolicy: 'Never',
          command,
          ...(hostDir === undefined
            ? {}
            : { volumeMounts: [{ name: 'host', mountPath: hostDir.mountPath, readOnly: true }] }),
        },
      ],
      ...(hostDir === undefined
        ? {}
        : { volumes: [{ name: 'host', hostPath: { path: hostDir.path, type: 'Directory' } }] }),
    },
  };
}

/** busybox httpd serving PAGE at /custom/stats on `port`. */
const httpdPod = (name: string, labels: Record<string, string>, port: number) =>
  realNodePod(
    name,
    {
      labels,
      annotations: {
        'prometheus.io/scrape': 'true',
        'prometheus.io/port': String(port),
        'prometheus.io/path': '/custom/stats',
        'prometheus.io/scheme': 'http',
      },
    },
    [
      'sh',
      '-c',
      `mkdir -p /www/custom && printf '${PAGE}' > /www/custom/stats && exec httpd -f -p ${String(port)} -h /www`,
    ],
  );

async function runningIp(name: string): Promise<string> {
  return eventually(
    `pod ${name} Running with an IP`,
    async () => {
      const pod = await core.readNamespacedPod({ name, namespace: ns.name });
      const ip = pod.status?.podIP;
      return pod.status?.phase === 'Running' && ip !== undefined && ip !== '' ? ip : undefined;
    },
    { timeoutMs: 120_000, intervalMs: 500 },
  );
}

beforeAll(async () => {
  ns = await createTestNamespace(kc, 'metrics-discovery');
  harness = await startHarness();
  harness.gateway.events.on('message', (message) => {
    if (message.payload?.$case === 'prometheusMetrics') families.push(message.payload.value);
    if (message.payload?.$case === 'profile') profiles.push(message.payload.value);
  });
  await core.createNamespacedPod({
    namespace: ns.name,
    body: httpdPod('scraped', { ...SELECTED, app: 'shop' }, 9102),
  });
  await core.createNamespacedPod({
    namespace: ns.name,
    body: httpdPod('not-selected', { app: 'other' }, 9103),
  });
  // pprof-app (a static Go binary) from the cluster build, mounted read-only from the machine.
  await core.createNamespacedPod({
    namespace: ns.name,
    body: realNodePod(
      'profiled',
      {
        labels: SELECTED,
        annotations: { 'kubexa.io/pprof-port': '6060', 'kubexa.io/pprof-container': 'main' },
      },
      ['/opt/pprof/pprof-app', '--listen', '0.0.0.0:6060'],
      { path: inject('clusterBinDir'), mountPath: '/opt/pprof' },
    ),
  });
}, 180_000);

afterAll(async () => {
  await harness[Symbol.asyncDispose]();
  await ns.delete();
});

describe('annotation discovery and profiles on the real node', () => {
  it('scrapes annotated pods at their IP and profiles the pprof pod; events and profiles reach the gateway', async () => {
    const [scrapedIp, otherIp, profiledIp] = await Promise.all([
      runningIp('scraped'),
      runningIp('not-selected'),
      runningIp('profiled'),
    ]);
    const { config } = load(
      [
        'collect:',
        '  metrics:',
        '    annotation_discovery:',
        '      enabled: true',
        `      namespace: ${ns.name}`,
        '      label_selector: kubexa.test/scrape=yes',
        '      interval: 2s',
        '    profiles:',
        '      enabled: true',
        '      annotation_discovery: true',
        `      namespace: ${ns.name}`,
        '      label_selector: kubexa.test/scrape=yes',
        '      interval: 60s',
        '      cpu_duration: 1s',
        '',
      ].join('\n'),
    );
    const logs = captureLogs();
    const source = wireMetricsSource(
      config.collect.metrics,
      { clusterId: 'c', agentId: 'a' },
      {
        logger: logs.logger,
        clock: systemClock,
        kube: kc,
        sink: harness.buffer,
        registry: new Registry(),
      },
    );
    await source.start(new AbortController().signal);
    try {
      await eventually(
        'both families of the scraped pod and three profiles at the gateway',
        () =>
          Promise.resolve(
            new Set(families.map((f) => (JSON.parse(f.metricFamilyJson) as { name: string }).name))
              .size >= 2 && new Set(profiles.map((p) => p.profileType)).size === 3
              ? true
              : undefined,
          ),
        { timeoutMs: 90_000, intervalMs: 500 },
      );
    } finally {
      await source.close();
    }
    // Scraped at the pod's IP with the annotated scheme, port and path: never through the API.
    const urls = new Set(families.map((f) => f.targetUrl));
    expect([...urls]).toEqual([`http://${scrapedIp}:9102/custom/stats`]);
    expect(families.some((f) => f.targetUrl.includes(otherIp))).toBe(false);
    const orders = families.find((f) => f.metricFamilyJson.includes('"orders_total"'));
    const family = JSON.parse(orders?.metricFamilyJson ?? '{}') as {
      type: string;
      metrics: { Labels: Record<string, string>; Value: number }[];
    };
    expect(family.type).toBe('METRIC_TYPE_COUNTER');
    expect(family.metrics).toEqual([
      expect.objectContaining({
        Labels: { shop: 'berlin', namespace: ns.name, pod: 'scraped' },
        Value: 17,
      }),
    ]);

    for (const type of ['cpu', 'heap', 'goroutine']) {
      const profile = profiles.find((p) => p.profileType === type);
      expect(profile, type).toMatchObject({
        namespace: ns.name,
        pod: 'profiled',
        container: 'main',
      });
      expect(profile?.targetUrl, type).toMatch(
        new RegExp(`^http://${profiledIp}:6060/debug/pprof`),
      );
      const parsed = decodePprof(profile?.pprof ?? new Uint8Array());
      expect(parsed.sampleTypes.length, type).toBeGreaterThan(0);
    }
    expect(
      decodePprof(profiles.find((p) => p.profileType === 'cpu')?.pprof ?? new Uint8Array())
        .sampleTypes,
    ).toEqual(['samples/count', 'cpu/nanoseconds']);
  });
});
