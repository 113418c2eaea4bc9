// An idle collector's CPU: the source's flush timer sleeps while there is no log to follow, and
// wakes when the first one opens. Observed on the timers themselves (the flush interval is the
// only 7 ms interval the source creates).
import type { V1Pod } from '@kubernetes/client-node';
import { pino } from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { FakeClock } from '../../../test/helpers/fake-clock.js';
import type { PodLogKubeAccess } from './kube-access.js';
import { createPodLogSource, noopPodLogCounters, type PodLogSource } from './pod-log-source.js';

const WAIT = { timeout: 10_000 };
const FLUSH_MS = 7;

const pod: V1Pod = {
  metadata: { name: 'web-1', namespace: 'prod', uid: 'uid-1' },
  spec: { nodeName: 'node-a', containers: [{ name: 'app' }] },
  status: {
    phase: 'Running',
    containerStatuses: [
      {
        name: 'app',
        image: 'i',
        imageID: '',
        ready: true,
        restartCount: 0,
        state: { running: { startedAt: new Date(0) } },
      },
    ],
  },
};

const sources: PodLogSource[] = [];
afterEach(async () => {
  for (const s of sources.splice(0)) await s.close();
  vi.restoreAllMocks();
});

describe('pod log flush timer', () => {
  it('sleeps with no pod to follow and wakes when a log opens', async () => {
    const timers = { armed: 0, cleared: 0 };
    const flushTimers = new Set<unknown>();
    const realSetInterval = globalThis.setInterval;
    const realClearInterval = globalThis.clearInterval;
    vi.spyOn(globalThis, 'setInterval').mockImplementation((callback: () => void, ms?: number) => {
      const timer = realSetInterval(callback, ms);
      if (ms === FLUSH_MS) {
        timers.armed++;
        flushTimers.add(timer);
      }
      return timer;
    });
    vi.spyOn(globalThis, 'clearInterval').mockImplementation(((timer?: NodeJS.Timeout) => {
      if (flushTimers.delete(timer)) timers.cleared++;
      realClearInterval(timer);
    }) as typeof clearInterval);

    const watchers: ((type: string, object: V1Pod) => void)[] = [];
    const kube: PodLogKubeAccess = {
      listWatch: () => ({
        list: () => Promise.resolve({ items: [], resourceVersion: '1' }),
        watch: (_rv, onEvent, signal) => {
          watchers.push(onEvent);
          return new Promise((_, reject) => {
            signal.addEventListener('abort', () => {
              reject(new Error('aborted'));
            });
          });
        },
      }),
      logs: {
        read: (_request, signal) =>
          new Promise((resolve) => {
            signal.addEventListener('abort', () => {
              resolve();
            });
          }),
      },
      owners: () => Promise.resolve(undefined),
    };
    const source = createPodLogSource(
      {
        logs: {
          tail_lines: 10,
          follow: true,
          exclude_namespaces: [],
          checkpoint_dir: '',
          rules: [
            {
              id: 'r',
              namespace: 'prod',
              pod_names: [],
              label_selector: '',
              field_selector: '',
              containers: [],
            },
          ],
        },
        identity: { clusterId: 'c', agentId: 'a' },
        flushIntervalMs: FLUSH_MS,
      },
      {
        logger: pino({ level: 'silent' }),
        clock: new FakeClock(),
        kube,
        sink: { enqueue: () => undefined },
        counters: noopPodLogCounters,
      },
    );
    sources.push(source);
    await source.start(new AbortController().signal);
    // No pod: armed once at start, then asleep after its first tick.
    await vi.waitFor(() => {
      expect(timers).toEqual({ armed: 1, cleared: 1 });
    }, WAIT);
    await new Promise((resolve) => setTimeout(resolve, FLUSH_MS * 10));
    expect(timers).toEqual({ armed: 1, cleared: 1 });
    // A pod to follow: its log opens and the timer wakes, and stays while the log is followed.
    await vi.waitFor(() => {
      expect(watchers.length).toBeGreaterThan(0);
    }, WAIT);
    for (const onEvent of watchers) onEvent('ADDED', pod);
    await vi.waitFor(() => {
      expect(timers.armed).toBe(2);
    }, WAIT);
    await new Promise((resolve) => setTimeout(resolve, FLUSH_MS * 10));
    expect(timers).toEqual({ armed: 2, cleared: 1 });
  });
});
