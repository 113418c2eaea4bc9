import { pino } from 'pino';
import { Counter, Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import { createHealthServer, type ComponentHealth, type HealthServer } from './health-server.js';
import { parseListenAddress } from './listen-address.js';

const servers: HealthServer[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) await server.close();
});

async function start(
  checks: { name: string; health: () => ComponentHealth | Promise<ComponentHealth> }[],
) {
  const registry = new Registry();
  new Counter({ name: 'kubexa_collector_test_total', help: 'test', registers: [registry] }).inc(2);
  const server = createHealthServer(
    {
      health: { host: '127.0.0.1', port: 0 },
      metrics: { host: '127.0.0.1', port: 0 },
      checkTimeoutMs: 200,
    },
    {
      logger: pino({ level: 'silent' }),
      registry,
      checks: checks.map((c) => ({ name: c.name, check: c.health })),
      now: () => Date.parse('2026-01-02T03:04:05Z'),
    },
  );
  await server.start(new AbortController().signal);
  servers.push(server);
  const { health, metrics } = server.ports();
  return {
    health: (path: string, init?: RequestInit) =>
      fetch(`http://127.0.0.1:${String(health)}${path}`, init),
    metrics: (path: string, init?: RequestInit) =>
      fetch(`http://127.0.0.1:${String(metrics)}${path}`, init),
  };
}

describe('health server', () => {
  it('answers /healthz with ok and a request id', async () => {
    const { health } = await start([]);
    const response = await health('/healthz');
    expect(response.status).toBe(200);
    expect(response.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    expect(await response.json()).toEqual({ status: 'ok', timestamp: '2026-01-02T03:04:05.000Z' });
  });

  it('is ready when every component is ok, listing them only with ?verbose', async () => {
    const { health } = await start([{ name: 'stream', health: () => ({ state: 'ok' }) }]);
    expect(await (await health('/readyz')).json()).not.toHaveProperty('components');
    const verbose = await health('/readyz?verbose');
    expect(verbose.status).toBe(200);
    expect(await verbose.json()).toMatchObject({
      status: 'ok',
      components: { stream: { status: 'ok', reason: null } },
    });
  });

  it('is not ready while a component is unhealthy, a check throws, or a check hangs', async () => {
    const { health } = await start([
      {
        name: 'stream',
        health: () => ({ state: 'unhealthy', reason: 'gateway disconnected for 45s' }),
      },
      { name: 'queue', health: () => Promise.reject(new Error('disk unreadable')) },
      { name: 'slow', health: () => new Promise<ComponentHealth>(() => undefined) },
      { name: 'k8s', health: () => ({ state: 'ok' }) },
    ]);
    const response = await health('/readyz');
    expect(response.status).toBe(503);
    expect(await response.json()).toMatchObject({
      status: 'degraded',
      components: {
        stream: { status: 'unhealthy', reason: 'gateway disconnected for 45s' },
        queue: { status: 'unhealthy', reason: 'disk unreadable' },
        slow: { status: 'unhealthy', reason: 'check timed out after 200 ms' },
        k8s: { status: 'ok' },
      },
    });
  });

  it('is not ready while a component is only degraded', async () => {
    const { health } = await start([
      { name: 'buffer', health: () => ({ state: 'degraded', reason: 'spill file 91 % full' }) },
      { name: 'stream', health: () => ({ state: 'ok' }) },
    ]);
    const response = await health('/readyz');
    expect(response.status).toBe(503);
    expect(await response.json()).toMatchObject({
      status: 'degraded',
      components: { buffer: { status: 'degraded', reason: 'spill file 91 % full' } },
    });
  });

  it('answers ?verbose=false as tersely as no query', async () => {
    const { health } = await start([{ name: 'stream', health: () => ({ state: 'ok' }) }]);
    const response = await health('/readyz?verbose=false');
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ status: 'ok', timestamp: '2026-01-02T03:04:05.000Z' });
  });

  it('refuses other methods with 405 and an Allow header', async () => {
    const { health, metrics } = await start([]);
    for (const response of [
      await health('/healthz', { method: 'POST' }),
      await health('/readyz', { method: 'DELETE' }),
      await metrics('/metrics', { method: 'PUT' }),
    ]) {
      expect(response.status).toBe(405);
      expect(response.headers.get('allow')).toBe('GET, HEAD');
    }
  });

  it('serves the registry in Prometheus text format on the metrics port only', async () => {
    const { health, metrics } = await start([]);
    const response = await metrics('/metrics');
    expect(response.headers.get('content-type')).toContain('text/plain');
    expect(await response.text()).toContain('kubexa_collector_test_total 2');
    expect((await health('/metrics')).status).toBe(404);
  });
});

describe('parseListenAddress', () => {
  it.each([
    [':8080', { host: '0.0.0.0', port: 8080 }],
    ['127.0.0.1:9090', { host: '127.0.0.1', port: 9090 }],
    ['[::1]:9090', { host: '::1', port: 9090 }],
  ])('parses %s', (address, expected) => {
    expect(parseListenAddress(address, 'observability.health_addr')).toEqual(expected);
  });

  it.each(['8080', 'localhost', ':99999', ':port'])('refuses %s naming the key', (address) => {
    expect(() => parseListenAddress(address, 'observability.health_addr')).toThrow(
      /^observability\.health_addr: .* is not host:port; write for example ":8080"/,
    );
  });
});
