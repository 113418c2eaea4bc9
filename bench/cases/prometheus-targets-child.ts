// The processes of the prometheus-targets case (bench/cases/prometheus-targets.ts), one role each:
//   serve <count>        serves <count> Prometheus pages on loopback, one port each; prints the
//                        URLs as one JSON line
//   collector <file>     the collector's metrics source (custom_endpoints from the config file)
//                        scraping them, with a sink that counts the encoded items
//   fetch <file>         the baseline: a bare loop per URL that GETs the page and reads its body
//                        at the same interval, with the same initial jitter, and nothing else
// Each scraper prints `scrapes <n> items <n>` every second.
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { wireMetricsSource } from '../../collector/sources/metrics/wiring.js';
import { systemClock } from '../../shared/clock.js';
import { loadConfig } from '../../shared/config/load-config.js';

const HOST = '127.0.0.1';
const REPORT_MS = 1000;

/** A service's page: ~120 series in counters, gauges and a histogram, about 14 KB. */
export function page(index: number): string {
  const lines: string[] = [];
  lines.push('# HELP http_requests_total Requests by route and code.');
  lines.push('# TYPE http_requests_total counter');
  for (let route = 0; route < 20; route++) {
    for (const code of ['200', '404', '500']) {
      lines.push(
        `http_requests_total{route="/api/v1/r${String(route)}",code="${code}",instance="svc-${String(index)}"} ${String(route * 1000 + index)}`,
      );
    }
  }
  lines.push('# TYPE http_request_duration_seconds histogram');
  for (let route = 0; route < 5; route++) {
    for (const le of ['0.005', '0.01', '0.05', '0.1', '0.5', '1', '+Inf']) {
      lines.push(
        `http_request_duration_seconds_bucket{route="/api/v1/r${String(route)}",le="${le}"} ${String(route * 7)}`,
      );
    }
    lines.push(`http_request_duration_seconds_sum{route="/api/v1/r${String(route)}"} 12.5`);
    lines.push(`http_request_duration_seconds_count{route="/api/v1/r${String(route)}"} 35`);
  }
  lines.push('# HELP process_resident_memory_bytes Resident memory size in bytes.');
  lines.push('# TYPE process_resident_memory_bytes gauge');
  lines.push(`process_resident_memory_bytes ${String(50_000_000 + index)}`);
  for (let queue = 0; queue < 15; queue++) {
    lines.push(`queue_depth{queue="q${String(queue)}"} ${String(queue * 3)}`);
  }
  return `${lines.join('\n')}\n`;
}

async function serve(count: number): Promise<void> {
  const urls: string[] = [];
  for (let i = 0; i < count; i++) {
    const body = page(i);
    const server = createServer((_request, response) => {
      response.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' });
      response.end(body);
    });
    server.listen(0, HOST);
    await once(server, 'listening');
    urls.push(`http://${HOST}:${String((server.address() as AddressInfo).port)}/metrics`);
  }
  process.stdout.write(`${JSON.stringify(urls)}\n`);
}

interface Plan {
  readonly urls: string[];
  readonly intervalMs: number;
}

function report(counts: { scrapes: number; items: number }): void {
  setInterval(() => {
    process.stdout.write(`scrapes ${String(counts.scrapes)} items ${String(counts.items)}\n`);
  }, REPORT_MS);
}

async function collector(plan: Plan): Promise<void> {
  const fileText = [
    'gateway: { address: "127.0.0.1:1", tls: false }',
    'collect:',
    '  metrics:',
    '    custom_endpoints:',
    ...plan.urls.map(
      (url, i) =>
        `      - { name: t${String(i)}, url: "${url}", interval: ${String(plan.intervalMs)}ms }`,
    ),
    '',
  ].join('\n');
  const { config } = loadConfig({ fileText, env: { KUBEXA_TENANT_TOKEN: 'bench' } });
  // No metrics.k8s.io rule and no discovery: the API server is never called.
  const kube = new KubeConfig();
  kube.loadFromOptions({
    clusters: [{ name: 'none', server: 'https://127.0.0.1:1' }],
    users: [{ name: 'none' }],
    contexts: [{ name: 'none', cluster: 'none', user: 'none' }],
    currentContext: 'none',
  });
  const counts = { scrapes: 0, items: 0 };
  const registry = new Registry();
  const source = wireMetricsSource(
    config.collect.metrics,
    { clusterId: 'bench', agentId: 'bench' },
    {
      logger: pino({ level: 'warn' }),
      clock: systemClock,
      kube,
      registry,
      sink: {
        enqueue() {
          counts.items++;
        },
      },
    },
  );
  await source.start(new AbortController().signal);
  // Scrapes as the collector counts them (its own self-metric).
  setInterval(() => {
    void registry
      .getSingleMetric('kubexa_collector_metrics_scrapes_total')
      ?.get()
      .then((metric) => {
        counts.scrapes = metric.values.reduce((sum, v) => sum + v.value, 0);
      });
  }, 500);
  report(counts);
}

function fetchLoop(plan: Plan): void {
  const counts = { scrapes: 0, items: 0 };
  for (const url of plan.urls) {
    const scrape = async () => {
      const response = await fetch(url, { headers: { accept: 'text/plain;version=0.0.4' } });
      const body = await response.text();
      counts.scrapes++;
      counts.items += body.length > 0 ? 1 : 0;
    };
    setTimeout(() => {
      void scrape().catch(() => undefined);
      setInterval(() => {
        void scrape().catch(() => undefined);
      }, plan.intervalMs);
    }, Math.random() * plan.intervalMs);
  }
  report(counts);
}

const [role, arg] = process.argv.slice(2);
if (role === 'serve') await serve(Number(arg));
else {
  const plan = JSON.parse(readFileSync(arg ?? '', 'utf8')) as Plan;
  if (role === 'collector') await collector(plan);
  else if (role === 'fetch') fetchLoop(plan);
  else throw new Error(`unknown role ${String(role)}`);
}
