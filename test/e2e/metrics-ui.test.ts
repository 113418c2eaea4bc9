// The Metrics view in headless Chromium, on the real path: a real test cluster with its real
// metrics-server (kwok reports the pods' usage from their annotations), a Prometheus endpoint
// served on loopback by this process (prom-client's registry), the pprof-app Go program the
// cluster build compiles (net/http/pprof), the collector's metrics source writing into a real
// buffer and gateway stream, and the page on the demo gateway's HTTP server. The charts must
// have points and pixels, the families table rows, and a downloaded profile must parse as
// profile.proto. Screenshots are left in test-results/demo-ui/.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { CoreV1Api } from '@kubernetes/client-node';
import type { Page } from 'playwright-core';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { wireMetricsSource } from '../../collector/sources/metrics/wiring.js';
import { ensureUiBuilt } from '../../demo-gateway/ui-build.js';
import { systemClock } from '../../shared/clock.js';
import { load } from '../../shared/config/load-for-test.js';
import { startCluster, stopCluster, type ClusterOptions } from '../cluster/cluster.js';
import { captureLogs, startHarness } from '../helpers/gateway-harness.js';
import { loadKubeConfig } from '../helpers/kube.js';
import { decodePprof } from '../helpers/pprof.js';
import { openDemoPage, requireChromium } from '../helpers/demo-page.js';

const ARTIFACTS = join(import.meta.dirname, '..', '..', 'test-results', 'demo-ui');
/** metrics-server's resolution is 10 s: two windows, plus its first scrape, plus a busy machine. */
const CHART_WAIT_MS = 100_000;
const UI_WAIT_MS = 30_000;
const NAMESPACE = 'shop';

/** A small application's registry: a counter, a gauge with labels and a histogram. */
function sampleRegistry(): Registry {
  const registry = new Registry();
  const requests = new Counter({
    name: 'shop_requests_total',
    help: 'Requests served.',
    labelNames: ['route', 'code'],
    registers: [registry],
  });
  requests.inc({ route: '/cart', code: '200' }, 42);
  requests.inc({ route: '/checkout', code: '502' }, 3);
  new Gauge({ name: 'shop_queue_depth', help: 'Orders waiting.', registers: [registry] }).set(7);
  const latency = new Histogram({
    name: 'shop_request_seconds',
    help: 'Request latency.',
    buckets: [0.05, 0.1, 0.5],
    registers: [registry],
  });
  for (const value of [0.02, 0.07, 0.3, 0.9]) latency.observe(value);
  return registry;
}

describe('the Metrics view in headless Chromium', () => {
  let page: Page;
  let url: string;
  let downloads: string;
  const cleanups: (() => unknown)[] = [];

  const shot = async (name: string) => {
    mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: true });
  };

  beforeAll(async () => {
    requireChromium();
    await ensureUiBuilt();
    const options: ClusterOptions = {
      name: `kubexa-metrics-ui-${String(process.pid)}`,
      workdir: mkdtempSync(join(tmpdir(), 'kubexa-metrics-ui-')),
      env: process.env,
    };
    cleanups.push(() => stopCluster(options));
    const cluster = await startCluster(options);
    const kube = loadKubeConfig(cluster.kubeconfigPath);
    const core = kube.makeApiClient(CoreV1Api);
    await core.createNamespace({ body: { metadata: { name: NAMESPACE } } });
    for (const [name, cpu, memory] of [
      ['web-1', '250m', '96Mi'],
      ['api-1', '600m', '180Mi'],
    ] as const) {
      await core.createNamespacedPod({
        namespace: NAMESPACE,
        body: {
          metadata: {
            name,
            annotations: {
              'kwok.x-k8s.io/usage-cpu': cpu,
              'kwok.x-k8s.io/usage-memory': memory,
            },
          },
          spec: {
            containers: [{ name: 'app', image: 'registry.invalid/app:1' }],
            tolerations: [{ key: 'kwok.x-k8s.io/node', operator: 'Exists', effect: 'NoSchedule' }],
          },
        },
      });
    }

    const registry = sampleRegistry();
    const prometheus: Server = createServer((_request, response) => {
      void registry.metrics().then((body) => {
        response.writeHead(200, { 'content-type': registry.contentType });
        response.end(body);
      });
    });
    prometheus.listen(0, '127.0.0.1');
    await once(prometheus, 'listening');
    cleanups.push(() => new Promise((resolve) => prometheus.close(resolve)));
    const promPort = (prometheus.address() as AddressInfo).port;

    const pprofApp: ChildProcess = spawn(
      join(cluster.binDir, 'pprof-app'),
      ['--listen', '127.0.0.1:0'],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    cleanups.push(() => pprofApp.kill('SIGTERM'));
    const [line] = (await once(
      createInterface({ input: pprofApp.stdout ?? process.stdin }),
      'line',
    )) as [string];
    const pprofAddress = line.replace('listening ', '').trim();

    const { config } = load(
      [
        'collect:',
        '  metrics:',
        '    rules:',
        `      - { id: shop, namespace: ${NAMESPACE}, resources: [pods], pod_interval: 3s }`,
        '      - { id: nodes, resources: [nodes], node_interval: 3s }',
        '    custom_endpoints:',
        `      - { name: shop, url: "http://127.0.0.1:${String(promPort)}/metrics", interval: 3s }`,
        '    profiles:',
        '      enabled: true',
        '      interval: 60s',
        '      cpu_duration: 1s',
        '      targets:',
        `        - { name: shop-web, url: "http://${pprofAddress}/debug/pprof", namespace: ${NAMESPACE}, pod: web-1, container: app, workload: Deployment/web }`,
        '',
      ].join('\n'),
    );
    const harness = await startHarness();
    cleanups.push(() => harness[Symbol.asyncDispose]());
    // The web UI first: its metrics store keeps what arrives from now on.
    const source = wireMetricsSource(
      config.collect.metrics,
      { clusterId: 'c', agentId: 'a' },
      {
        logger: captureLogs().logger,
        clock: systemClock,
        kube,
        sink: harness.buffer,
        registry: new Registry(),
      },
    );
    await source.start(new AbortController().signal);
    cleanups.push(() => source.close());

    downloads = mkdtempSync(join(tmpdir(), 'kubexa-downloads-'));
    cleanups.push(() => {
      rmSync(downloads, { recursive: true, force: true });
    });
    ({ url, page } = await openDemoPage(harness.gateway, cleanups, {
      viewport: { width: 1500, height: 1300 },
      downloadsPath: downloads,
    }));
  }, 300_000);

  afterAll(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
  });

  /**
   * Points the chart was given (a line needs two per series) and the pixels uPlot drew on its
   * canvas. Browser code as text: the test's TypeScript has no DOM types.
   */
  const chartState = async (id: string) =>
    page.evaluate<{ points: number; series: number; inked: number }>(`(() => {
      const box = document.querySelector('.chart-${id}');
      const canvas = box?.querySelector('canvas');
      let inked = 0;
      if (canvas) {
        const pixels = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
        for (let i = 3; i < pixels.length; i += 4) if (pixels[i] > 0) inked++;
      }
      return { points: Number(box?.dataset.points ?? 0), series: Number(box?.dataset.series ?? 0), inked };
    })()`);

  /** Every chart was given two samples per series, and uPlot holds (plotted) two sample times. */
  const CHARTS_HAVE_LINES = `['node-cpu', 'node-memory', 'pod-cpu', 'pod-memory'].every((id) => {
    const data = document.querySelector('.chart-' + id)?.dataset;
    const series = Number(data?.series ?? 0);
    return series > 0 && Number(data?.points) >= 2 * series && Number(data?.plotted) >= 2;
  })`;

  it('draws node and pod CPU and memory as live line charts', async () => {
    await page.goto(`${url}/#/metrics`);
    await page.waitForFunction(CHARTS_HAVE_LINES, undefined, {
      timeout: CHART_WAIT_MS,
      polling: 500,
    });
    for (const id of ['node-cpu', 'node-memory', 'pod-cpu', 'pod-memory']) {
      const state = await chartState(id);
      expect(state.points, id).toBeGreaterThanOrEqual(2 * state.series);
      // uPlot drew lines and points on its canvas (an empty chart has only axes, off canvas).
      expect(state.inked, id).toBeGreaterThan(200);
    }
    expect((await chartState('pod-cpu')).series).toBe(2);
    const legend = await page.locator('.chart-pod-cpu .u-legend').textContent();
    expect(legend).toContain('shop/web-1');
    expect(legend).toContain('shop/api-1');
    await shot('metrics-charts');
  });

  it('lists the custom endpoint families in a table', async () => {
    const rows = page.locator('.families-table tr.family-row');
    await rows.first().waitFor({ timeout: UI_WAIT_MS });
    const names = await Promise.all(
      (await rows.all()).map((row) => row.getAttribute('data-family')),
    );
    expect(names).toEqual(
      expect.arrayContaining(['shop_requests_total', 'shop_queue_depth', 'shop_request_seconds']),
    );
    const counter = page.locator('tr.family-row[data-family="shop_requests_total"]');
    expect(await counter.locator('td').nth(2).textContent()).toBe('counter');
    expect(await counter.locator('td').nth(3).textContent()).toBe('2');
  });

  it('lists the profiles and downloads one that parses as profile.proto', async () => {
    const cpu = page.locator('tr.profile-cpu');
    await cpu.first().waitFor({ timeout: UI_WAIT_MS });
    await page.locator('tr.profile-heap').first().waitFor({ timeout: UI_WAIT_MS });
    await shot('metrics');
    const [download] = await Promise.all([
      page.waitForEvent('download'),
      cpu.first().locator('.profile-download').click(),
    ]);
    expect(download.suggestedFilename()).toMatch(/^shop_web-1-cpu-.*\.pb\.gz$/);
    const path = join(downloads, 'cpu.pb.gz');
    await download.saveAs(path);
    const parsed = decodePprof(readFileSync(path));
    expect(parsed.sampleTypes).toEqual(['samples/count', 'cpu/nanoseconds']);
    expect(parsed.durationNanos).toBeGreaterThan(0n);
  });
});
