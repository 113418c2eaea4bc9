import { afterEach, describe, expect, it } from 'vitest';
import { AgentMessage } from '../../../proto/index.js';
import { FakeClock } from '../../../test/helpers/fake-clock.js';
import { captureLogs } from '../../../test/helpers/gateway-harness.js';
import type { BufferItem } from '../../buffer/types.js';
import { KubeRequestError } from '../../watch/kube-http.js';
import {
  KubeMetricsScraper,
  UNAVAILABLE_RETRY_MS,
  windowSeconds,
  type KubeMetricsRule,
} from './kube-metrics.js';
import type { MetricsApi, UsageItem } from './metrics-api.js';
import type { ScrapeRecord } from './self-metrics.js';

const identity = { clusterId: 'cluster', agentId: 'agent' };

function podMetrics(namespace: string, name: string, cpu: string[], memory: string[]): UsageItem {
  return {
    metadata: { name, namespace },
    timestamp: '2026-01-02T03:04:05Z',
    window: '10.5s',
    containers: cpu.map((c, i) => ({
      name: `c${String(i)}`,
      usage: { cpu: c, memory: memory[i] ?? '0' },
    })),
  };
}

class ScriptedApi implements MetricsApi {
  pods: UsageItem[] = [];
  nodes: UsageItem[] = [];
  selected = new Set<string>();
  failure: Error | undefined;
  calls = 0;
  listPodMetrics() {
    this.calls++;
    if (this.failure !== undefined) return Promise.reject(this.failure);
    return Promise.resolve(this.pods);
  }
  listNodeMetrics() {
    this.calls++;
    if (this.failure !== undefined) return Promise.reject(this.failure);
    return Promise.resolve(this.nodes);
  }
  listSelectedPods() {
    return Promise.resolve(this.selected);
  }
}

const rule: KubeMetricsRule = {
  id: 'r',
  namespace: '',
  resources: ['pods', 'nodes'],
  pod_names: [],
  node_names: [],
  label_selector: '',
  field_selector: '',
};

function setup(rules = [rule]) {
  const clock = new FakeClock();
  const api = new ScriptedApi();
  const items: BufferItem[] = [];
  const records: ScrapeRecord[] = [];
  const logs = captureLogs();
  const abort = new AbortController();
  const scraper = new KubeMetricsScraper(
    { rules, podIntervalMs: 15_000, nodeIntervalMs: 20_000, identity },
    {
      api,
      clock,
      logger: logs.logger,
      sink: { enqueue: (item) => items.push(item) },
      recorder: { record: (r) => records.push(r) },
      random: () => 0.5,
    },
  );
  stops.push(async () => {
    abort.abort();
    await scraper.stopped();
  });
  /** Lets every loop reach its next sleep, then moves time. */
  const tick = async (ms: number) => {
    await new Promise((resolve) => setImmediate(resolve));
    clock.advance(ms);
    await new Promise((resolve) => setImmediate(resolve));
    await new Promise((resolve) => setImmediate(resolve));
  };
  return { clock, api, items, records, logs, abort, scraper, tick };
}

const stops: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const stop of stops.splice(0)) await stop();
});

const decode = (item: BufferItem) => {
  const message = AgentMessage.decode(item.payload);
  if (message.payload?.$case !== 'kubeMetrics') throw new Error('not a kube_metrics message');
  return { meta: message.meta, event: message.payload.value };
};

describe('metrics.k8s.io scrapes', () => {
  it('starts each loop after a jitter within its interval', () => {
    const { clock, scraper, abort } = setup();
    scraper.start(abort.signal);
    // random() = 0.5: half of each interval.
    expect(clock.pending().sort()).toEqual([10_000, 7_500]);
  });

  it('sends one event per pod with its containers summed exactly, and one per node', async () => {
    const { api, items, scraper, abort, tick, records } = setup();
    api.pods = [
      podMetrics('shop', 'web-1', ['1500500n', '250m', '0.1'], ['64Mi', '1Ki', '100']),
      podMetrics('shop', 'web-2', ['1'], ['1Gi']),
    ];
    api.nodes = [
      {
        metadata: { name: 'node-a' },
        timestamp: '2026-01-02T03:04:05Z',
        window: '1m0s',
        usage: { cpu: '2', memory: '3Gi' },
      },
    ];
    scraper.start(abort.signal);
    await tick(10_000);
    const events = items.map(decode);
    expect(items.every((item) => item.kind === 'metric')).toBe(true);
    expect(events.map((e) => e.event)).toEqual([
      {
        resourceType: 1,
        namespace: 'shop',
        name: 'web-1',
        cpuNanocores: '351500500',
        memoryBytes: String(64 * 1024 * 1024 + 1024 + 100),
        timestamp: String(Date.parse('2026-01-02T03:04:05Z')),
        windowSeconds: 11,
      },
      {
        resourceType: 1,
        namespace: 'shop',
        name: 'web-2',
        cpuNanocores: '1000000000',
        memoryBytes: '1073741824',
        timestamp: String(Date.parse('2026-01-02T03:04:05Z')),
        windowSeconds: 11,
      },
      {
        resourceType: 2,
        namespace: '',
        name: 'node-a',
        cpuNanocores: '2000000000',
        memoryBytes: String(3 * 1024 ** 3),
        timestamp: String(Date.parse('2026-01-02T03:04:05Z')),
        windowSeconds: 60,
      },
    ]);
    expect(events[0]?.meta).toMatchObject({ clusterId: 'cluster', agentId: 'agent' });
    expect(records.map((r) => [r.target, r.status, r.samples])).toEqual([
      ['pods/r', 'success', 2],
      ['nodes/r', 'success', 1],
    ]);
  });

  it('keeps only pods matching pod_names and, with selectors, the pods they select', async () => {
    const selective = {
      ...rule,
      resources: ['pods'],
      pod_names: ['web-*'],
      label_selector: 'app=web',
    };
    const { api, items, scraper, abort, tick } = setup([selective]);
    api.pods = [
      podMetrics('shop', 'web-1', ['1'], ['1']),
      podMetrics('shop', 'web-2', ['1'], ['1']),
      podMetrics('shop', 'api-1', ['1'], ['1']),
    ];
    api.selected = new Set(['shop/web-2', 'shop/api-1']);
    scraper.start(abort.signal);
    await tick(7_500);
    expect(items.map((item) => decode(item).event.name)).toEqual(['web-2']);
  });

  it('warns once while metrics.k8s.io is absent, retries every 30 s, and recovers', async () => {
    const { api, items, scraper, abort, tick, logs, clock, records } = setup();
    api.failure = new KubeRequestError(
      404,
      '/apis/metrics.k8s.io/v1beta1/pods answered HTTP 404: the server could not find the requested resource',
      'the server could not find the requested resource',
    );
    scraper.start(abort.signal);
    await tick(10_000);
    expect(scraper.availability()).toBe('unavailable');
    for (let i = 0; i < 4; i++) await tick(UNAVAILABLE_RETRY_MS);
    const warnings = logs.lines.filter((l) => l.msg.startsWith('metrics.k8s.io is not served'));
    expect(warnings).toHaveLength(1);
    expect(items).toEqual([]);
    expect(clock.pending().every((ms) => ms === UNAVAILABLE_RETRY_MS)).toBe(true);
    expect(records.every((r) => r.status === 'unavailable')).toBe(true);

    api.failure = undefined;
    api.pods = [podMetrics('shop', 'web-1', ['1'], ['1'])];
    await tick(UNAVAILABLE_RETRY_MS);
    expect(scraper.availability()).toBe('available');
    expect(items.length).toBeGreaterThan(0);
    expect(logs.lines.some((l) => l.msg === 'metrics.k8s.io scrapes succeed again')).toBe(true);
    // Back at the rule's intervals.
    expect(clock.pending().sort()).toEqual([15_000, 20_000]);
  });

  it('backs off from 5 s on other errors and logs a reason once', async () => {
    const { api, scraper, abort, tick, logs, clock } = setup([{ ...rule, resources: ['pods'] }]);
    api.failure = new KubeRequestError(
      500,
      '/apis/metrics.k8s.io/v1beta1/pods answered HTTP 500: etcd is sad',
      'etcd is sad',
    );
    scraper.start(abort.signal);
    await tick(7_500);
    expect(clock.pending()).toEqual([5_000]);
    await tick(5_000);
    expect(clock.pending()).toEqual([10_000]);
    await tick(10_000);
    // Capped at the interval (15 s).
    expect(clock.pending()).toEqual([15_000]);
    const failures = logs.lines.filter((l) => l.msg === 'metrics.k8s.io scrape failed');
    expect(failures).toHaveLength(1);
    expect(failures[0]?.['reason']).toBe('HTTP 500: etcd is sad');
    expect(scraper.availability()).toBe('unknown');
  });

  it.each([
    ['10.5s', 11],
    ['1m0s', 60],
    ['500ms', 1],
    ['0s', 0],
    ['-1s', 0],
    [undefined, 0],
    ['junk', 0],
  ])('window %j is %d seconds', (text, seconds) => {
    expect(windowSeconds(text)).toBe(seconds);
  });
});
