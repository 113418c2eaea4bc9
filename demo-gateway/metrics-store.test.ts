// The Metrics view's store and routes: what arrives on the gateway stream is kept with bounded
// retention (points per series, series, families, profiles and their bytes), a redelivered
// message is kept once, and a profile downloads as exactly the bytes the agent shipped.
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import {
  AgentMessage,
  KubeMetricsResourceType,
  type MetricsEvent,
  type ProfileEvent,
} from '../proto/index.js';
import { DemoGateway } from './demo-gateway.js';
import { registerMetricsRoutes } from './metrics-routes.js';
import { MetricsStore } from './metrics-store.js';
import { fastify } from 'fastify';

const pod = (name: string, at: number, cpuNanocores: string): MetricsEvent => ({
  resourceType: KubeMetricsResourceType.KUBE_METRICS_RESOURCE_TYPE_POD,
  namespace: 'shop',
  name,
  cpuNanocores,
  memoryBytes: '1048576',
  timestamp: String(at),
  windowSeconds: 10,
});

const profile = (bytes: number, type = 'heap'): ProfileEvent => ({
  namespace: 'shop',
  pod: 'web-1',
  container: 'app',
  workload: 'Deployment/web',
  profileType: type,
  durationMs: '0',
  timestamp: '1764590000000',
  pprof: Buffer.alloc(bytes, 7),
  targetUrl: 'http://10.0.0.1:6060/debug/pprof',
});

describe('MetricsStore', () => {
  it('keeps one point per sample window, in order, and at most pointsPerSeries', () => {
    const store = new MetricsStore({ pointsPerSeries: 3 });
    store.addKubeMetrics(pod('web-1', 1000, '250000000'));
    // The same window again (metrics-server answers it until its next resolution): replaced.
    store.addKubeMetrics(pod('web-1', 1000, '260000000'));
    // An older sample than the newest: ignored.
    store.addKubeMetrics(pod('web-1', 500, '1'));
    for (const at of [2000, 3000, 4000]) store.addKubeMetrics(pod('web-1', at, '500000000'));
    const [series] = store.snapshot().pods;
    expect(series?.key).toBe('shop/web-1');
    expect(series?.points).toEqual([
      [2000, 0.5, 1048576],
      [3000, 0.5, 1048576],
      [4000, 0.5, 1048576],
    ]);
  });

  it('drops the least recently updated series beyond seriesPerKind', () => {
    const store = new MetricsStore({ seriesPerKind: 2 });
    store.addKubeMetrics(pod('a', 1, '1'));
    store.addKubeMetrics(pod('b', 1, '1'));
    store.addKubeMetrics(pod('a', 2, '1'));
    store.addKubeMetrics(pod('c', 1, '1'));
    expect(store.snapshot().pods.map((s) => s.name)).toEqual(['a', 'c']);
  });

  it('summarizes a family from its JSON and counts what does not parse', () => {
    const store = new MetricsStore({ families: 1 });
    const json = JSON.stringify({
      name: 'shop_requests_total',
      help: 'Requests.',
      type: 'METRIC_TYPE_COUNTER',
      metrics: [{ Labels: { code: '200' }, Value: 42 }, { Labels: { code: '502' } }],
    });
    store.addPrometheusFamily({
      targetUrl: 'http://x/metrics',
      metricFamilyJson: json,
      scrapedAt: '5',
    });
    store.addPrometheusFamily({
      targetUrl: 'http://x/metrics',
      metricFamilyJson: '{',
      scrapedAt: '6',
    });
    expect(store.malformedFamilies).toBe(1);
    expect(store.families()).toEqual([
      {
        targetUrl: 'http://x/metrics',
        name: 'shop_requests_total',
        type: 'counter',
        help: 'Requests.',
        series: 2,
        examples: [
          { labels: { code: '200' }, value: 42 },
          { labels: { code: '502' }, value: null },
        ],
        scrapedAt: 5,
      },
    ]);
  });

  it('keeps the newest profiles within the count and byte limits', () => {
    const store = new MetricsStore({ profiles: 3, profileBytes: 250 });
    for (let i = 0; i < 4; i++) store.addProfile(profile(100));
    // 4 x 100 B: the byte limit (250) keeps two, the newest.
    expect(store.profiles().map((p) => p.id)).toEqual(['4', '3']);
    expect(store.profile('1')).toBeUndefined();
    // One profile larger than the limit is still kept (alone): the newest is always downloadable.
    store.addProfile(profile(400));
    expect(store.profiles().map((p) => p.id)).toEqual(['5']);
  });
});

describe('metrics routes', () => {
  const closers: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close();
  });

  it('serves a received profile as its raw bytes, once per message id', async () => {
    const gateway = new DemoGateway({}, { logger: pino({ level: 'silent' }) });
    closers.push(() => gateway.close());
    const app = fastify();
    closers.push(() => app.close());
    const store = registerMetricsRoutes(app, gateway);
    const event = profile(0, 'cpu');
    event.pprof = Buffer.from([0x1f, 0x8b, 8, 0, 1, 2, 3, 250]);
    const message = AgentMessage.fromPartial({
      messageId: 'm1',
      payload: { $case: 'profile', value: event },
    });
    // No agent is connected: the listeners get a session as the gateway would describe one.
    const session = { sessionId: 's1', clusterId: 'c1', agentId: 'a1' };
    gateway.events.emit('message', message, true, session as never);
    // A redelivery of the same message: not stored again.
    gateway.events.emit('message', message, false, session as never);
    expect(store.profiles()).toHaveLength(1);
    const list = await app.inject({ url: '/api/metrics/profiles' });
    const [row] = list.json<{ id: string; bytes: number; type: string }[]>();
    expect(row).toMatchObject({ bytes: 8, type: 'cpu' });
    const download = await app.inject({ url: `/api/metrics/profiles/${row?.id ?? ''}/pprof` });
    expect(download.statusCode).toBe(200);
    expect(download.headers['content-type']).toBe('application/octet-stream');
    expect(download.headers['content-disposition']).toMatch(
      /^attachment; filename="shop_web-1-cpu-2025-12-01T.*\.pb\.gz"$/,
    );
    expect([...download.rawPayload]).toEqual([...event.pprof]);
    expect((await app.inject({ url: '/api/metrics/profiles/99/pprof' })).statusCode).toBe(404);
  });
});
