// Prometheus targets against real endpoints on loopback, served by a child process
// (test/fixtures/prometheus-server.ts): prom-client's registry output, the format fixtures, and
// one path per kind of bad input. Real clock, real sockets.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentMessage } from '../../proto/index.js';
import { systemClock } from '../../shared/clock.js';
import { captureLogs } from '../helpers/gateway-harness.js';
import { compileFilter, type WireFamily } from '../../collector/sources/metrics/family-json.js';
import {
  PrometheusTargets,
  type PromTarget,
} from '../../collector/sources/metrics/prometheus-targets.js';
import type { ScrapeRecord } from '../../collector/sources/metrics/self-metrics.js';
import { until } from '../helpers/wait.js';

const fixtures = new URL('../fixtures/', import.meta.url);
const tls = (name: string) => fileURLToPath(new URL(`tls/${name}`, fixtures));
let server: ChildProcess;
let ports: { http: number; https: number };
let scratch: string;
let serverToken: string;
let clientToken: string;

beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'kubexa-prom-'));
  serverToken = join(scratch, 'server-token');
  clientToken = join(scratch, 'client-token');
  await writeFile(serverToken, 'token-one\n');
  await writeFile(clientToken, 'token-one\n');
  server = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      fileURLToPath(new URL('prometheus-server.ts', fixtures)),
      '--token-file',
      serverToken,
      '--tls-cert',
      tls('server.pem'),
      '--tls-key',
      tls('server-key.pem'),
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const lines = createInterface({ input: server.stdout! });
  const [first] = (await once(lines, 'line')) as [string];
  ports = JSON.parse(first) as typeof ports;
}, 30_000);

afterAll(async () => {
  server.kill('SIGTERM');
  await rm(scratch, { recursive: true, force: true });
});

const target = (name: string, path: string, extra: Partial<PromTarget> = {}): PromTarget => ({
  name,
  url: `http://127.0.0.1:${String(ports.http)}${path}`,
  intervalMs: 1000,
  timeoutMs: 500,
  maxBodyBytes: 1024 * 1024,
  caFile: '',
  bearerTokenFile: '',
  extraLabels: {},
  filter: compileFilter([], []),
  ...extra,
});

function run(targets: PromTarget[], random?: () => number) {
  const logs = captureLogs();
  const records: ScrapeRecord[] = [];
  const events: { url: string; family: WireFamily; scrapedAt: string }[] = [];
  const abort = new AbortController();
  const set = new PrometheusTargets(targets, {
    sink: {
      enqueue(item) {
        const message = AgentMessage.decode(item.payload);
        if (message.payload?.$case !== 'prometheusMetrics') throw new Error('unexpected payload');
        const value = message.payload.value;
        events.push({
          url: value.targetUrl,
          family: JSON.parse(value.metricFamilyJson) as WireFamily,
          scrapedAt: value.scrapedAt,
        });
      },
    },
    logger: logs.logger,
    clock: systemClock,
    recorder: { record: (r) => records.push(r) },
    identity: { clusterId: 'c', agentId: 'a' },
    ...(random === undefined ? {} : { random }),
  });
  set.start(abort.signal);
  return {
    logs,
    records,
    events,
    set,
    stop: async () => {
      abort.abort();
      await set.stopped();
    },
  };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const hits = async (): Promise<Record<string, number>> =>
  (await fetch(`http://127.0.0.1:${String(ports.http)}/hits`)).json() as Promise<
    Record<string, number>
  >;

describe('Prometheus endpoints', () => {
  it('sends one event per family in the Go JSON shape; extra_labels win; allow and deny apply', async () => {
    const { events, stop } = run([
      target('app', '/metrics', {
        extraLabels: { route: 'from-config', cluster: 'prod' },
        filter: compileFilter(['app_.*'], ['app_queue_.*']),
      }),
    ]);
    try {
      await until(() => events.length >= 2);
    } finally {
      await stop();
    }
    const byName = new Map(events.map((e) => [e.family.name, e]));
    expect([...byName.keys()].sort()).toEqual(['app_latency_seconds', 'app_requests_total']);
    const requests = byName.get('app_requests_total')!;
    expect(requests.url).toBe(`http://127.0.0.1:${String(ports.http)}/metrics`);
    expect(requests.family).toEqual({
      name: 'app_requests_total',
      help: 'Requests handled by the app.',
      type: 'METRIC_TYPE_COUNTER',
      metrics: [
        { Labels: { code: '200', route: 'from-config', cluster: 'prod' }, Value: 41, Timestamp: 0 },
        { Labels: { code: '500', route: 'from-config', cluster: 'prod' }, Value: 2, Timestamp: 0 },
      ],
    });
    expect(byName.get('app_latency_seconds')?.family).toEqual({
      name: 'app_latency_seconds',
      help: 'Request latency.',
      type: 'METRIC_TYPE_HISTOGRAM',
      metrics: [
        {
          Labels: { route: 'from-config', cluster: 'prod' },
          Value: 2.35,
          Timestamp: 0,
          Count: 3,
          Buckets: { '0.1': 1, '0.5': 2, '+Inf': 3 },
        },
      ],
    });
    expect(Number(requests.scrapedAt)).toBeGreaterThan(Date.now() - 60_000);
  });

  it('reads the edge-case fixture and OpenMetrics; NaN and ±Inf values are left out of the JSON', async () => {
    const { events, stop } = run([target('edge', '/edge'), target('om', '/openmetrics')]);
    try {
      await until(
        () =>
          events.some((e) => e.family.name === 'special') &&
          events.some((e) => e.family.name === 'foo'),
      );
    } finally {
      await stop();
    }
    const family = (name: string) => events.find((e) => e.family.name === name)?.family;
    expect(family('special')?.metrics.map((m) => m.Value)).toEqual([0.0015, -0.25]);
    expect(family('rpc_duration_seconds')?.metrics).toEqual([
      {
        Labels: {},
        Value: 1.7560473e7,
        Timestamp: 0,
        Count: 2693,
        Quantiles: { '0.01': 3102, '0.5': 4773, '0.99': 76656 },
      },
    ]);
    expect(family('http_requests_total')?.metrics[0]).toEqual({
      Labels: { code: '200', method: 'post' },
      Value: 1027,
      Timestamp: 1395066363000,
    });
    // The family with only an +Inf sample has nothing JSON can carry: no event.
    expect(family('something_weird')).toBeUndefined();
    expect(family('process_cpu_seconds')).toEqual({
      name: 'process_cpu_seconds',
      help: 'Total user and system CPU time spent in seconds.',
      type: 'METRIC_TYPE_COUNTER',
      metrics: [{ Labels: {}, Value: 4.20072246e6, Timestamp: 0 }],
    });
    expect(family('go_goroutines')?.metrics[0]?.Timestamp).toBe(1605281325500);
  });

  it('counts and logs each bad target once with its URL; the good target keeps its schedule', async () => {
    const before = await hits();
    const started = Date.now();
    const { logs, records, stop } = run([
      target('good', '/metrics'),
      target('not-found', '/not-found'),
      target('broken', '/broken'),
      target('big', '/big'),
      target('hang', '/hang'),
      target('malformed', '/malformed'),
      target('redirect', '/redirect'),
      target('refused', '/metrics', { url: 'http://127.0.0.1:1/metrics' }),
    ]);
    // Long enough for two scrapes of each bad target (backoff 5 s) and ~12 of the good one.
    await sleep(12_500);
    await stop();
    const elapsed = Date.now() - started;
    const after = await hits();
    const delta = (path: string) => (after[path] ?? 0) - (before[path] ?? 0);

    const statuses = (name: string) => [
      ...new Set(records.filter((r) => r.target === name).map((r) => r.status)),
    ];
    expect(statuses('good')).toEqual(['success']);
    expect(statuses('not-found')).toEqual(['client_error']);
    expect(statuses('broken')).toEqual(['server_error']);
    expect(statuses('big')).toEqual(['too_large']);
    expect(statuses('hang')).toEqual(['timeout']);
    expect(statuses('malformed')).toEqual(['parse_error']);
    expect(statuses('redirect')).toEqual(['redirect']);
    expect(statuses('refused')).toEqual(['error']);
    for (const name of ['not-found', 'broken', 'big', 'malformed', 'redirect']) {
      expect(records.filter((r) => r.target === name).length, name).toBeGreaterThanOrEqual(2);
    }
    // No retry on 4xx; three attempts per scrape on 5xx and timeouts. A scrape still running
    // when the set stopped has hit the server without being recorded: up to one more.
    const scrapes = (name: string) => records.filter((r) => r.target === name).length;
    const attempts = (path: string, name: string, perScrape: number) => {
      const made = delta(path);
      expect(made, path).toBeGreaterThanOrEqual(perScrape * scrapes(name));
      expect(made, path).toBeLessThanOrEqual(perScrape * (scrapes(name) + 1));
    };
    attempts('/not-found', 'not-found', 1);
    attempts('/broken', 'broken', 3);
    attempts('/hang', 'hang', 3);
    // The good target kept its 1 s schedule while the others failed.
    expect(delta('/metrics')).toBeGreaterThanOrEqual(Math.floor(elapsed / 1000) - 2);

    const failures = logs.lines.filter((l) => l.msg === 'prometheus scrape failed');
    const byTarget = new Map<string, number>();
    for (const line of failures) {
      const name = String(line['target']);
      byTarget.set(name, (byTarget.get(name) ?? 0) + 1);
    }
    expect(Object.fromEntries(byTarget)).toEqual({
      'not-found': 1,
      broken: 1,
      big: 1,
      hang: 1,
      malformed: 1,
      redirect: 1,
      refused: 1,
    });
    const line = (name: string) => failures.find((l) => l['target'] === name);
    expect(line('not-found')?.['url']).toBe(`http://127.0.0.1:${String(ports.http)}/not-found`);
    expect(line('not-found')?.['reason']).toBe('HTTP 404');
    expect(line('malformed')?.['reason']).toMatch(/^line 2: unterminated quoted string/);
    expect(line('redirect')?.['reason']).toMatch(
      /HTTP 302 redirect to http:\/\/169\.254\.169\.254/,
    );
    expect(line('big')?.['reason']).toBe('body larger than the 1048576-byte cap');
    expect(logs.lines.filter((l) => l.level >= 50)).toEqual([]);
  }, 40_000);

  it('retries a 5xx within the scrape and succeeds on the third attempt', async () => {
    const { records, events, stop } = run(
      [target('flaky', '/flaky', { intervalMs: 60_000 })],
      () => 0,
    );
    try {
      await until(() => records.length >= 1);
    } finally {
      await stop();
    }
    expect(records[0]?.status).toBe('success');
    expect(events.length).toBeGreaterThan(0);
  });

  it('re-reads a rotated bearer token file, and verifies TLS with the CA file', async () => {
    const { records, logs, stop } = run([
      target('auth', '/auth', { bearerTokenFile: clientToken }),
      target('tls', '/metrics', {
        url: `https://127.0.0.1:${String(ports.https)}/metrics`,
        caFile: tls('ca.pem'),
      }),
      target('tls-unknown-ca', '/metrics', {
        url: `https://127.0.0.1:${String(ports.https)}/metrics`,
      }),
    ]);
    try {
      await until(() => records.some((r) => r.target === 'auth'));
      expect(records.find((r) => r.target === 'auth')?.status).toBe('success');
      // The server's token rotates first: our old token is refused ...
      await writeFile(serverToken, 'token-two\n');
      await until(() => records.some((r) => r.target === 'auth' && r.status === 'client_error'));
      // ... until the mounted file rotates too, without a restart.
      await writeFile(clientToken, 'token-two\n');
      await until(
        () => records.filter((r) => r.target === 'auth').at(-1)?.status === 'success',
        'the rotated token accepted',
        { timeoutMs: 15_000 },
      );
    } finally {
      await stop();
    }
    expect(records.find((r) => r.target === 'tls')?.status).toBe('success');
    expect(records.find((r) => r.target === 'tls-unknown-ca')?.status).toBe('error');
    const tlsFailure = logs.lines.find((l) => l['target'] === 'tls-unknown-ca');
    expect(String(tlsFailure?.['reason'])).toMatch(/certificate/i);
    expect(logs.raw.join('\n')).not.toContain('token-two');
  }, 40_000);
});
