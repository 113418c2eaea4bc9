// Cluster profiles against real pprof endpoints: two processes of a small Go program
// (test/cluster/build/pprof-app, compiled by build.sh) serving net/http/pprof on loopback.
// Every profile type arrives as a ProfileEvent whose bytes parse as a pprof profile of that
// type; the global cap holds (never two profiles in flight with max_concurrent 1), and a
// profile over max_profile_bytes is dropped and counted, not shipped.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import {
  ProfileTargets,
  type ProfileTarget,
  type ProfilesOptions,
} from '../../collector/sources/metrics/profiles.js';
import {
  registerScrapeMetrics,
  type ScrapeRecord,
} from '../../collector/sources/metrics/self-metrics.js';
import { AgentMessage, type ProfileEvent } from '../../proto/index.js';
import { systemClock } from '../../shared/clock.js';
import { captureLogs } from '../helpers/gateway-harness.js';
import { eventually } from '../helpers/kube.js';
import { decodePprof } from '../helpers/pprof.js';
import { seriesValue } from '../helpers/prom-series.js';

const apps: ChildProcess[] = [];
const addresses: string[] = [];

beforeAll(async () => {
  for (let i = 0; i < 2; i++) {
    const app = spawn(join(inject('clusterBinDir'), 'pprof-app'), ['--listen', '127.0.0.1:0'], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    apps.push(app);
    const [line] = (await once(createInterface({ input: app.stdout }), 'line')) as [string];
    addresses.push(line.replace('listening ', '').trim());
  }
});

afterAll(() => {
  for (const app of apps) app.kill('SIGTERM');
});

const target = (index: number): ProfileTarget => ({
  name: `app-${String(index)}`,
  baseUrl: `http://${addresses[index] ?? ''}/debug/pprof/`,
  namespace: 'shop',
  pod: `app-${String(index)}`,
  container: 'app',
  workload: 'Deployment/app',
});

function run(targets: ProfileTarget[], options: Partial<ProfilesOptions> = {}) {
  const events: ProfileEvent[] = [];
  const records: ScrapeRecord[] = [];
  const registry = new Registry();
  const recorder = registerScrapeMetrics(registry);
  const logs = captureLogs();
  const abort = new AbortController();
  const profiles = new ProfileTargets(
    targets,
    {
      intervalMs: 600_000,
      cpuDurationMs: 1000,
      timeoutMs: 10_000,
      types: ['cpu', 'heap', 'goroutine'],
      maxConcurrent: 1,
      maxProfileBytes: 8 * 1024 * 1024,
      ...options,
    },
    {
      sink: {
        enqueue(item) {
          expect(item.kind).toBe('metric');
          const message = AgentMessage.decode(item.payload);
          if (message.payload?.$case !== 'profile') throw new Error('not a profile message');
          events.push(message.payload.value);
        },
      },
      logger: logs.logger,
      clock: systemClock,
      recorder: {
        record: (r) => {
          records.push(r);
          recorder.record(r);
        },
      },
      identity: { clusterId: 'c', agentId: 'a' },
      random: () => 0,
    },
  );
  profiles.start(abort.signal);
  return {
    events,
    records,
    registry,
    logs,
    profiles,
    stop: async () => {
      abort.abort();
      await profiles.stopped();
    },
  };
}

describe('cluster profiles from net/http/pprof', () => {
  it('ships CPU, heap and goroutine profiles of each target, one profile at a time', async () => {
    const { events, profiles, registry, stop } = run([target(0), target(1)]);
    try {
      await eventually(
        'six profiles',
        () => Promise.resolve(events.length >= 6 ? true : undefined),
        {
          timeoutMs: 60_000,
          intervalMs: 200,
        },
      );
    } finally {
      await stop();
    }
    expect(profiles.semaphore.peak).toBe(1);
    const kinds = events.map((e) => `${e.pod}/${e.profileType}`).sort();
    expect(kinds).toEqual([
      'app-0/cpu',
      'app-0/goroutine',
      'app-0/heap',
      'app-1/cpu',
      'app-1/goroutine',
      'app-1/heap',
    ]);
    for (const event of events) {
      expect(event).toMatchObject({
        namespace: 'shop',
        container: 'app',
        workload: 'Deployment/app',
      });
      expect(Number(event.timestamp)).toBeGreaterThan(Date.now() - 120_000);
      // Decoded with pprof-format (a maintained pprof decoder), after gunzip.
      const decoded = decodePprof(event.pprof);
      const { profile } = decoded;
      // Every sample carries one value per sample type; stacks name known locations (checked by
      // decodePprof; a goroutine without a stack may have none).
      expect(profile.sample.length, event.profileType).toBeGreaterThan(0);
      for (const sample of profile.sample) {
        expect(sample.value).toHaveLength(profile.sampleType.length);
      }
      expect(profile.sample.some((sample) => sample.locationId.length > 0)).toBe(true);
      // The self-metrics of this profile's target, on the real registry.
      const series = { source: 'profile', target: `${event.pod}/${event.profileType}` };
      const value = (name: string, labels = {}) =>
        seriesValue(registry, `kubexa_collector_metrics_${name}`, { ...series, ...labels });
      expect(await value('scrapes_total', { status: 'success' })).toBe(1);
      expect(await value('samples_total')).toBe(1);
      expect(await value('scrape_duration_seconds_count')).toBe(1);
      const lastSuccess = (await value('last_success_timestamp_seconds')) ?? 0;
      expect(lastSuccess * 1000).toBeGreaterThanOrEqual(Number(event.timestamp));
      expect(lastSuccess * 1000 - Number(event.timestamp)).toBeLessThan(5000);
      const total = (index: number) =>
        profile.sample.reduce((sum, sample) => sum + Number(sample.value[index] ?? 0), 0);
      if (event.profileType === 'cpu') {
        expect(event.durationMs).toBe('1000');
        expect(event.targetUrl).toMatch(/\/debug\/pprof\/profile\?seconds=1$/);
        expect(decoded.sampleTypes).toEqual(['samples/count', 'cpu/nanoseconds']);
        expect(decoded.durationNanos).toBeGreaterThanOrEqual(900_000_000n);
        // A 1 s CPU profile takes its second: the duration histogram saw it.
        expect(await value('scrape_duration_seconds_sum')).toBeGreaterThanOrEqual(0.9);
        expect(total(1)).toBeGreaterThan(0);
        // The program burns CPU in sha256: the sampled stacks reach it.
        expect([...decoded.sampledFunctions].some((name) => name.includes('sha256'))).toBe(true);
      } else if (event.profileType === 'heap') {
        expect(event.durationMs).toBe('0');
        expect(decoded.sampleTypes).toEqual([
          'alloc_objects/count',
          'alloc_space/bytes',
          'inuse_objects/count',
          'inuse_space/bytes',
        ]);
        // The program keeps up to 64 buffers of 64 KiB alive in main.allocate.
        expect(total(3)).toBeGreaterThan(0);
        expect(decoded.sampledFunctions).toContain('main.allocate');
      } else {
        expect(decoded.sampleTypes).toEqual(['goroutine/count']);
        // main, burn, allocate and the pprof server's own: at least four goroutines.
        expect(total(0)).toBeGreaterThanOrEqual(4);
        expect(decoded.sampledFunctions).toContain('main.burn');
      }
    }
  });

  it('drops and counts a profile over max_profile_bytes, and keeps going', async () => {
    const { events, records, logs, stop } = run([target(0)], {
      types: ['heap', 'goroutine'],
      maxProfileBytes: 64,
    });
    try {
      await eventually(
        'two records',
        () => Promise.resolve(records.length >= 2 ? true : undefined),
        {
          timeoutMs: 30_000,
          intervalMs: 100,
        },
      );
    } finally {
      await stop();
    }
    expect(events).toEqual([]);
    expect(records.map((r) => [r.target, r.status])).toEqual([
      ['app-0/heap', 'too_large'],
      ['app-0/goroutine', 'too_large'],
    ]);
    expect(logs.lines.filter((l) => l.msg === 'profile failed')).toHaveLength(2);
  });
});
