import { describe, expect, it, vi } from 'vitest';
import { FakeClock } from '../../../test/helpers/fake-clock.js';
import { captureLogs } from '../../../test/helpers/gateway-harness.js';
import type { ListWatch } from '../../watch/list-watch.js';
import {
  PodDiscovery,
  prometheusUrl,
  watchedPod,
  type RunningPod,
  type WatchedPod,
} from './pod-discovery.js';

/** Generous: a shared 2-core machine can be slow to run the discovery's callbacks. */
const WAIT = { timeout: 10_000 };

const running = (
  annotations: Record<string, string>,
  ip = '10.1.2.3',
  ports: number[] = [],
): RunningPod => ({
  namespace: 'shop',
  name: 'web-1',
  ip,
  annotations,
  pod: {
    spec: {
      containers: [{ name: 'app', ports: ports.map((containerPort) => ({ containerPort })) }],
    },
  },
});

describe('prometheus.io annotations', () => {
  it.each([
    [
      { 'prometheus.io/scrape': 'true', 'prometheus.io/port': '9102' },
      'http://10.1.2.3:9102/metrics',
    ],
    [
      {
        'prometheus.io/scrape': 'True',
        'prometheus.io/port': '8443',
        'prometheus.io/scheme': 'https',
        'prometheus.io/path': 'stats',
      },
      'https://10.1.2.3:8443/stats',
    ],
    [{ 'prometheus.io/scrape': 'false', 'prometheus.io/port': '9102' }, undefined],
    [{ 'prometheus.io/port': '9102' }, undefined],
    [{ 'prometheus.io/scrape': 'true', 'prometheus.io/port': '99999' }, undefined],
  ])('%j → %s', (annotations, url) => {
    expect(prometheusUrl(running(annotations))).toBe(url);
  });

  it('falls back to the first declared container port, and brackets IPv6', () => {
    expect(prometheusUrl(running({ 'prometheus.io/scrape': 'true' }, 'fd00::7', [8080]))).toBe(
      'http://[fd00::7]:8080/metrics',
    );
  });

  it('follows the watch: Running pods with an IP that match pod_names, changes applied at once', async () => {
    const pod = (
      name: string,
      phase: string,
      ip: string | undefined,
      [rv = '', port = '1']: string[],
    ) =>
      watchedPod({
        metadata: {
          name,
          namespace: 'shop',
          uid: `uid-${name}`,
          resourceVersion: rv,
          annotations: { 'prometheus.io/scrape': 'true', 'prometheus.io/port': port },
        },
        spec: { containers: [{ name: 'app', env: [{ name: 'SECRET', value: 'x' }] }] },
        status: { phase, ...(ip === undefined ? {} : { podIP: ip }) },
      });
    const applied: string[][] = [];
    const events: ((emit: (type: string, object: WatchedPod) => void) => void)[] = [];
    let emit: ((type: string, object: WatchedPod) => void) | undefined;
    const pods: ListWatch<WatchedPod> = {
      list: () =>
        Promise.resolve({
          items: [
            pod('web-1', 'Running', '10.0.0.1', ['1']),
            pod('web-2', 'Pending', '10.0.0.2', ['2']),
            pod('web-3', 'Running', undefined, ['3']),
            pod('api-1', 'Running', '10.0.0.4', ['4']),
          ],
          resourceVersion: '4',
        }),
      watch: (_rv, onEvent, signal) => {
        emit = onEvent;
        for (const step of events) step(onEvent);
        return new Promise((resolve) => {
          signal.addEventListener('abort', () => {
            resolve();
          });
        });
      },
    };
    const discovery = new PodDiscovery(
      {
        what: 'prometheus',
        podNames: ['web-*'],
        refreshMs: 0,
        targetsOf: (p) => [prometheusUrl(p) ?? ''],
        apply: (targets) => {
          applied.push([...targets]);
        },
      },
      { pods, clock: new FakeClock(), logger: captureLogs().logger },
    );
    const abort = new AbortController();
    discovery.start(abort.signal);
    try {
      await vi.waitFor(() => {
        expect(applied.at(-1)).toEqual(['http://10.0.0.1:1/metrics']);
      }, WAIT);
      // A relist of four pods is one apply, not four.
      expect(applied).toHaveLength(1);
      await vi.waitFor(() => {
        expect(emit).toBeDefined();
      }, WAIT);
      emit?.('MODIFIED', pod('web-2', 'Running', '10.0.0.2', ['5']));
      await vi.waitFor(() => {
        expect(applied.at(-1)).toEqual(['http://10.0.0.1:1/metrics', 'http://10.0.0.2:1/metrics']);
      }, WAIT);
      emit?.('MODIFIED', pod('web-1', 'Running', '10.0.0.1', ['6', '9102']));
      emit?.('DELETED', pod('web-2', 'Running', '10.0.0.2', ['7']));
      await vi.waitFor(() => {
        expect(applied.at(-1)).toEqual(['http://10.0.0.1:9102/metrics']);
      }, WAIT);
    } finally {
      abort.abort();
      await discovery.stopped();
    }
  });

  it('keeps only what discovery reads of a pod', () => {
    const cached = watchedPod({
      metadata: { name: 'a', namespace: 'n', uid: 'u', resourceVersion: '9' },
      spec: { containers: [{ name: 'app', env: [{ name: 'TOKEN', value: 'secret' }] }] },
      status: { phase: 'Running', podIP: '10.0.0.9' },
    });
    expect(cached.key).toBe('n/a');
    expect(JSON.stringify(cached)).not.toContain('secret');
  });
});
