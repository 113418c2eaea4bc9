// The scrape policy of a Prometheus target, on real loopback servers in this process, with time
// driven by a FakeClock (every wait the scraper asks for is recorded and served at once): the
// retries (3 attempts 1 s apart on timeouts and 5xx, none on 4xx), the backoff that doubles from
// 5 s and caps at 2 min, the TLS 1.2 floor against a server that only speaks TLS 1.0/1.1, and the
// self-metrics each scrape leaves in a real prom-client registry.
import { once } from 'node:events';
import { createServer as createHttp, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createHttps, type ServerOptions } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compileFilter } from '../../collector/sources/metrics/family-json.js';
import {
  PrometheusTargets,
  type PromTarget,
} from '../../collector/sources/metrics/prometheus-targets.js';
import { registerScrapeMetrics } from '../../collector/sources/metrics/self-metrics.js';
import { FakeClock } from '../helpers/fake-clock.js';
import { captureLogs, TLS_FIXTURES } from '../helpers/gateway-harness.js';
import { seriesValue } from '../helpers/prom-series.js';
import { until } from '../helpers/wait.js';

/** Three samples in two families. */
const PAGE = [
  '# TYPE jobs_total counter',
  'jobs_total{queue="a"} 3',
  'jobs_total{queue="b"} 4',
  '# TYPE workers gauge',
  'workers 2',
  '',
].join('\n');

interface Endpoint {
  readonly url: string;
  /** Requests that reached the handler, per path. */
  readonly hits: Map<string, number>;
  /** TLS handshakes the server refused. */
  handshakeFailures: number;
  /** The TLS version of each request that reached the handler. */
  readonly protocols: string[];
  close(): Promise<void>;
}

/** /flaky answers 503 while this is true, else the page. */
let flakyFails = true;

function handler(endpoint: () => Endpoint) {
  return (req: IncomingMessage, res: ServerResponse): void => {
    const { hits, protocols } = endpoint();
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    hits.set(path, (hits.get(path) ?? 0) + 1);
    const protocol = (req.socket as Partial<TLSSocket>).getProtocol?.();
    if (typeof protocol === 'string') protocols.push(protocol);
    if (path === '/hang') return; // never answers: the scraper's timeout ends it
    const status =
      path === '/metrics' || (path === '/flaky' && !flakyFails)
        ? 200
        : path === '/flaky'
          ? 503
          : 404;
    res.writeHead(status, { 'Content-Type': 'text/plain; version=0.0.4' });
    res.end(status === 200 ? PAGE : `HTTP ${String(status)}`);
  };
}

async function listen(tls?: ServerOptions): Promise<Endpoint> {
  const endpoint: Endpoint = {
    url: '',
    hits: new Map(),
    handshakeFailures: 0,
    protocols: [],
    close: () => Promise.resolve(),
  };
  const server =
    tls === undefined
      ? createHttp(handler(() => endpoint))
      : createHttps(
          { cert: TLS_FIXTURES.cert, key: TLS_FIXTURES.key, ...tls },
          handler(() => endpoint),
        );
  server.on('tlsClientError', () => {
    endpoint.handshakeFailures++;
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return Object.assign(endpoint, {
    url: `${tls === undefined ? 'http' : 'https'}://127.0.0.1:${String(port)}`,
    close: async () => {
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
    },
  });
}

let plain: Endpoint;
let legacyTls: Endpoint;
let tls12: Endpoint;

beforeAll(async () => {
  plain = await listen();
  // Only TLS 1.0 and 1.1; OpenSSL 3 needs security level 0 to offer them at all.
  legacyTls = await listen({
    minVersion: 'TLSv1',
    maxVersion: 'TLSv1.1',
    ciphers: 'DEFAULT@SECLEVEL=0',
  });
  // Exactly TLS 1.2: the floor, not only 1.3, must be accepted.
  tls12 = await listen({ minVersion: 'TLSv1.2', maxVersion: 'TLSv1.2' });
});

afterAll(async () => {
  await Promise.all([plain, legacyTls, tls12].map((e) => e.close()));
});

const target = (name: string, url: string, extra: Partial<PromTarget> = {}): PromTarget => ({
  name,
  url,
  intervalMs: 1000,
  timeoutMs: 2000,
  maxBodyBytes: 1024 * 1024,
  caFile: '',
  bearerTokenFile: '',
  extraLabels: {},
  filter: compileFilter([], []),
  ...extra,
});

/** One target on its own FakeClock (advancing a clock wakes every sleeper on it). */
function run(one: PromTarget) {
  const clock = new FakeClock();
  const registry = new Registry();
  const logs = captureLogs();
  const abort = new AbortController();
  const set = new PrometheusTargets([one], {
    sink: { enqueue: () => undefined },
    logger: logs.logger,
    clock,
    recorder: registerScrapeMetrics(registry),
    identity: { clusterId: 'c', agentId: 'a' },
    random: () => 0, // no initial jitter: the first sleep is 0
  });
  set.start(abort.signal);
  let served = 0;
  return {
    clock,
    registry,
    logs,
    /**
     * Serves the next `count` sleeps the scraper asks for, each at once; returns each sleep's
     * length with the requests `hits()` counted when it was asked for (the attempt before it
     * had reached the server by then: the server counts before it answers).
     */
    async sleeps(count: number, hits: () => number): Promise<[number, number][]> {
      const seen: [number, number][] = [];
      for (let i = 0; i < count; i++, served++) {
        await until(() => clock.sleeps.length > served, `sleep ${String(served)}`);
        const ms = clock.sleeps[served] ?? Number.NaN;
        seen.push([ms, hits()]);
        clock.advance(ms);
      }
      return seen;
    },
    stop: async () => {
      abort.abort();
      await set.stopped();
    },
  };
}

const custom = (name: string) => ({ source: 'custom', target: name });
const failedLines = (logs: ReturnType<typeof captureLogs>) =>
  logs.lines.filter((l) => l.msg === 'prometheus scrape failed');

describe('Prometheus scrape retries and backoff', () => {
  it('retries a 5xx twice 1 s apart, backs off from 5 s to a 2 min cap, resets on success', async () => {
    flakyFails = true;
    const flaky = run(target('flaky', `${plain.url}/flaky`, { intervalMs: 3000 }));
    const hits = () => plain.hits.get('/flaky') ?? 0;
    const backoffs = [5000, 10_000, 20_000, 40_000, 80_000, 120_000, 120_000];
    try {
      // The jitter (0), then per failed scrape: attempt, 1 s, attempt, 1 s, attempt, backoff.
      const expected: [number, number][] = [[0, 0]];
      backoffs.forEach((backoff, i) => {
        expected.push([1000, 3 * i + 1], [1000, 3 * i + 2], [backoff, 3 * i + 3]);
      });
      expect(await flaky.sleeps(expected.length, hits)).toEqual(expected);

      // The endpoint recovers: one attempt, then the interval; the next failure starts at 5 s.
      flakyFails = false;
      expect(await flaky.sleeps(1, hits)).toEqual([[3000, 22]]);
      flakyFails = true;
      expect(await flaky.sleeps(3, hits)).toEqual([
        [1000, 23],
        [1000, 24],
        [5000, 25],
      ]);
    } finally {
      await flaky.stop();
    }
    // Logged once per run of failures (with the URL), and the recovery once.
    expect(failedLines(flaky.logs).map((l) => l['url'])).toEqual([
      `${plain.url}/flaky`,
      `${plain.url}/flaky`,
    ]);
    expect(
      flaky.logs.lines.filter((l) => l.msg === 'prometheus scrape succeeds again'),
    ).toHaveLength(1);
    const { registry } = flaky;
    const flakySeries = custom('flaky');
    expect(
      await seriesValue(registry, 'kubexa_collector_metrics_scrapes_total', {
        ...flakySeries,
        status: 'server_error',
      }),
    ).toBe(8);
    expect(
      await seriesValue(registry, 'kubexa_collector_metrics_scrapes_total', {
        ...flakySeries,
        status: 'success',
      }),
    ).toBe(1);
    // Each failed scrape spanned its two 1 s retry waits (clock time); the success none.
    expect(
      await seriesValue(
        registry,
        'kubexa_collector_metrics_scrape_duration_seconds_count',
        flakySeries,
      ),
    ).toBe(9);
    expect(
      await seriesValue(
        registry,
        'kubexa_collector_metrics_scrape_duration_seconds_sum',
        flakySeries,
      ),
    ).toBe(16);
    expect(
      await seriesValue(registry, 'kubexa_collector_metrics_scrape_duration_seconds_bucket', {
        ...flakySeries,
        le: 1,
      }),
    ).toBe(1);
    // The one success brought the page's three samples, at the fake clock's time then.
    expect(await seriesValue(registry, 'kubexa_collector_metrics_samples_total', flakySeries)).toBe(
      3,
    );
    const successAt = 1_700_000_000_000 + 7 * 2000 + backoffs.reduce((a, b) => a + b, 0);
    expect(
      await seriesValue(
        registry,
        'kubexa_collector_metrics_last_success_timestamp_seconds',
        flakySeries,
      ),
    ).toBe(successAt / 1000);
  });

  it('never retries a 4xx: one attempt per scrape, the same backoff to 2 min', async () => {
    const missing = run(target('missing', `${plain.url}/missing`));
    const hits = () => plain.hits.get('/missing') ?? 0;
    try {
      expect(await missing.sleeps(8, hits)).toEqual([
        [0, 0],
        [5000, 1],
        [10_000, 2],
        [20_000, 3],
        [40_000, 4],
        [80_000, 5],
        [120_000, 6],
        [120_000, 7],
      ]);
    } finally {
      await missing.stop();
    }
    const lines = failedLines(missing.logs);
    expect(lines).toHaveLength(1);
    expect(lines[0]?.['url']).toBe(`${plain.url}/missing`);
    expect(
      await seriesValue(missing.registry, 'kubexa_collector_metrics_scrapes_total', {
        ...custom('missing'),
        status: 'client_error',
      }),
    ).toBe(7);
    // Never a success: no samples, no last-success series.
    expect(
      await seriesValue(
        missing.registry,
        'kubexa_collector_metrics_samples_total',
        custom('missing'),
      ),
    ).toBeUndefined();
    expect(
      await seriesValue(
        missing.registry,
        'kubexa_collector_metrics_last_success_timestamp_seconds',
        custom('missing'),
      ),
    ).toBeUndefined();
  });

  it('retries a timeout like a 5xx: three attempts 1 s apart, then the backoff', async () => {
    const hang = run(target('hang', `${plain.url}/hang`, { timeoutMs: 100 }));
    const hits = () => plain.hits.get('/hang') ?? 0;
    try {
      expect(await hang.sleeps(7, hits)).toEqual([
        [0, 0],
        [1000, 1],
        [1000, 2],
        [5000, 3],
        [1000, 4],
        [1000, 5],
        [10_000, 6],
      ]);
    } finally {
      await hang.stop();
    }
    expect(
      await seriesValue(hang.registry, 'kubexa_collector_metrics_scrapes_total', {
        ...custom('hang'),
        status: 'timeout',
      }),
    ).toBe(2);
  });
});

describe('the TLS 1.2 floor', () => {
  it('refuses a TLS 1.0/1.1-only server: counted each scrape, logged once', async () => {
    const legacy = run(
      target('legacy', `${legacyTls.url}/metrics`, { caFile: TLS_FIXTURES.caPath }),
    );
    const hits = () => legacyTls.hits.get('/metrics') ?? 0;
    try {
      // A refused handshake is no timeout or 5xx: no retry within the scrape, straight to backoff.
      expect(await legacy.sleeps(4, hits)).toEqual([
        [0, 0],
        [5000, 0],
        [10_000, 0],
        [20_000, 0],
      ]);
    } finally {
      await legacy.stop();
    }
    // The server saw the handshakes and refused them; no request ever reached it.
    expect(legacyTls.handshakeFailures).toBeGreaterThanOrEqual(3);
    expect(legacyTls.protocols).toEqual([]);
    expect(
      await seriesValue(legacy.registry, 'kubexa_collector_metrics_scrapes_total', {
        ...custom('legacy'),
        status: 'error',
      }),
    ).toBe(3);
    const lines = failedLines(legacy.logs);
    expect(lines).toHaveLength(1);
    expect(lines[0]?.['url']).toBe(`${legacyTls.url}/metrics`);
    expect(String(lines[0]?.['reason'])).toMatch(/^TLS handshake refused: .*TLS 1\.2 or newer/);
  });

  it('scrapes a TLS 1.2 server verified with the configured CA', async () => {
    const modern = run(target('tls12', `${tls12.url}/metrics`, { caFile: TLS_FIXTURES.caPath }));
    const hits = () => tls12.hits.get('/metrics') ?? 0;
    try {
      expect(await modern.sleeps(3, hits)).toEqual([
        [0, 0],
        [1000, 1],
        [1000, 2],
      ]);
    } finally {
      await modern.stop();
    }
    expect(tls12.protocols).toEqual(['TLSv1.2', 'TLSv1.2']);
    const tlsSeries = custom('tls12');
    expect(
      await seriesValue(modern.registry, 'kubexa_collector_metrics_scrapes_total', {
        ...tlsSeries,
        status: 'success',
      }),
    ).toBe(2);
    expect(
      await seriesValue(modern.registry, 'kubexa_collector_metrics_samples_total', tlsSeries),
    ).toBe(6);
    expect(
      await seriesValue(
        modern.registry,
        'kubexa_collector_metrics_last_success_timestamp_seconds',
        tlsSeries,
      ),
    ).toBe((1_700_000_000_000 + 1000) / 1000);
    expect(failedLines(modern.logs)).toEqual([]);
  });
});
