// The demo's metrics sources, so the Metrics view fills within seconds: a Prometheus endpoint
// on loopback (a "shop" application's prom-client registry whose values move), the pprof-app Go
// program of the test cluster build (net/http/pprof) as a profile target, and kwok usage
// annotations on the sample pods, changed every few seconds so metrics-server's pod and node
// figures move (kwok reports a pod's usage from its kwok.x-k8s.io/usage-* annotations).
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';

const HOST = '127.0.0.1';
/** metrics-server's resolution in the test cluster is 10 s. */
const USAGE_EVERY_MS = 10_000;
const SCRAPE_INTERVAL = '5s';

export interface DemoMetrics {
  /** Lines for the collector's config under `collect:` (the metrics section). */
  readonly configLines: readonly string[];
  readonly describe: string;
  stop(): Promise<void>;
}

/** A shop's registry: requests by route and code, a queue depth, a latency histogram. */
function shopRegistry(): { registry: Registry; tick: (n: number) => void } {
  const registry = new Registry();
  const requests = new Counter({
    name: 'shop_http_requests_total',
    help: 'HTTP requests served, by route and status code.',
    labelNames: ['route', 'code'],
    registers: [registry],
  });
  const queue = new Gauge({
    name: 'shop_orders_queued',
    help: 'Orders waiting for payment.',
    registers: [registry],
  });
  const latency = new Histogram({
    name: 'shop_http_request_duration_seconds',
    help: 'HTTP request latency.',
    labelNames: ['route'],
    buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1],
    registers: [registry],
  });
  const inventory = new Gauge({
    name: 'shop_inventory_items',
    help: 'Items in stock, by warehouse.',
    labelNames: ['warehouse'],
    registers: [registry],
  });
  const routes = ['/cart', '/checkout', '/product', '/api/search'];
  const tick = (n: number) => {
    for (const [i, route] of routes.entries()) {
      requests.inc({ route, code: '200' }, 5 + ((n * (i + 3)) % 17));
      if ((n + i) % 7 === 0) requests.inc({ route, code: '502' });
      latency.observe({ route }, 0.005 + (((n * 37 + i * 11) % 100) / 100) * 0.4);
    }
    queue.set(3 + ((n * 5) % 11));
    inventory.set({ warehouse: 'berlin' }, 1200 - (n % 300));
    inventory.set({ warehouse: 'lisbon' }, 800 + ((n * 3) % 90));
  };
  return { registry, tick };
}

async function servePrometheus(): Promise<{ url: string; stop: () => Promise<void> }> {
  const { registry, tick } = shopRegistry();
  let n = 0;
  tick(n);
  const timer = setInterval(() => {
    tick(++n);
  }, 1000);
  const server = createServer((_request, response) => {
    void registry.metrics().then((body) => {
      response.writeHead(200, { 'content-type': registry.contentType });
      response.end(body);
    });
  });
  server.listen(0, HOST);
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://${HOST}:${String(port)}/metrics`,
    stop: () =>
      new Promise<void>((resolve) => {
        clearInterval(timer);
        server.close(() => {
          resolve();
        });
      }),
  };
}

/** pprof-app on loopback, when the cluster build has it; its base URL. */
async function startPprofApp(
  binDir: string | undefined,
): Promise<{ baseUrl: string; child: ChildProcess } | undefined> {
  const binary = binDir === undefined ? '' : join(binDir, 'pprof-app');
  if (binary === '' || !existsSync(binary)) return undefined;
  const child = spawn(binary, ['--listen', `${HOST}:0`], { stdio: ['ignore', 'pipe', 'ignore'] });
  const [line] = (await once(createInterface({ input: child.stdout }), 'line')) as [string];
  return { baseUrl: `http://${line.replace('listening ', '').trim()}/debug/pprof`, child };
}

/** A usage between `low` and `high` that drifts: a slow wave plus noise, per pod. */
function wave(n: number, seed: number, low: number, high: number): number {
  const phase = Math.sin((n + seed * 3) / 4) * 0.5 + 0.5;
  const noise = ((n * 7919 + seed * 104_729) % 100) / 100;
  return Math.round(low + (high - low) * (0.75 * phase + 0.25 * noise));
}

/** Changes the demo pods' kwok usage annotations every 10 s, until stopped. */
function moveUsage(kc: KubeConfig, namespaces: readonly string[], label: string): () => void {
  const core = kc.makeApiClient(CoreV1Api);
  let n = 0;
  let running = Promise.resolve();
  const step = async () => {
    n++;
    for (const namespace of namespaces) {
      const pods = await core.listNamespacedPod({ namespace, labelSelector: label });
      for (const [i, pod] of pods.items.entries()) {
        const seed = i + namespace.length;
        // A JSON patch (client-node's default patch type): the pod's annotations with the two set.
        await core.patchNamespacedPod({
          namespace,
          name: pod.metadata?.name ?? '',
          body: [
            {
              op: 'add',
              path: '/metadata/annotations',
              value: {
                ...pod.metadata?.annotations,
                'kwok.x-k8s.io/usage-cpu': `${String(wave(n, seed, 40, 450))}m`,
                'kwok.x-k8s.io/usage-memory': `${String(wave(n, seed + 5, 60, 240))}Mi`,
              },
            },
          ],
        });
      }
    }
  };
  const timer = setInterval(() => {
    running = running.then(step).catch(() => undefined);
  }, USAGE_EVERY_MS);
  running = running.then(step).catch(() => undefined);
  return () => {
    clearInterval(timer);
  };
}

/**
 * Starts the demo's metrics sources. `binDir` is the local cluster's binaries (pprof-app);
 * `kc` and `namespaces` the sample workload's, whose pods get moving usage.
 */
export async function startDemoMetrics(options: {
  readonly binDir: string | undefined;
  readonly kc: KubeConfig | undefined;
  readonly namespaces: readonly string[];
  readonly podLabel: string;
}): Promise<DemoMetrics> {
  const prometheus = await servePrometheus();
  const pprof = await startPprofApp(options.binDir);
  const stopUsage =
    options.kc === undefined
      ? () => undefined
      : moveUsage(options.kc, options.namespaces, options.podLabel);
  const lines = [
    '  metrics:',
    '    rules:',
    ...(options.namespaces.length === 0
      ? ['      - { id: pods, resources: [pods], pod_interval: 5s }']
      : options.namespaces.map(
          (ns) => `      - { id: ${ns}, namespace: ${ns}, resources: [pods], pod_interval: 5s }`,
        )),
    '      - { id: nodes, resources: [nodes], node_interval: 5s }',
    '    custom_endpoints:',
    `      - { name: shop, url: "${prometheus.url}", interval: ${SCRAPE_INTERVAL}, extra_labels: { env: demo } }`,
  ];
  if (pprof !== undefined) {
    lines.push(
      '    profiles:',
      '      enabled: true',
      '      interval: 30s',
      '      cpu_duration: 5s',
      '      targets:',
      `        - { name: pprof-app, url: "${pprof.baseUrl}", workload: "Process/pprof-app" }`,
    );
  }
  return {
    configLines: lines,
    describe: `Prometheus ${prometheus.url}${pprof === undefined ? '' : `, pprof ${pprof.baseUrl}`}`,
    async stop() {
      stopUsage();
      // Not when it has exited already, by a signal included (Ctrl-C or `timeout` signal the
      // whole process group): its 'exit' would never come again and the demo's cleanup hung
      // there, leaving the local cluster running.
      if (pprof?.child.exitCode === null && pprof.child.signalCode === null) {
        const gone = once(pprof.child, 'exit');
        pprof.child.kill('SIGTERM');
        await gone;
      }
      await prometheus.stop();
    },
  };
}
