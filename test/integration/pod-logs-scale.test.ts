// 250 eligible containers (50 pods x 5) with the stream cap at 200: the source never has more
// than 200 log streams open, counted both by its own stats and by the log requests it has open
// against the API server, and every container is eventually collected (its line arrives) because
// the fairness slice rotates the slots.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { BufferItem } from '../../collector/buffer/types.js';
import {
  kubePodLogAccess,
  type PodLogKubeAccess,
} from '../../collector/sources/pod-logs/kube-access.js';
import { createPodLogSource } from '../../collector/sources/pod-logs/pod-log-source.js';
import { AgentMessage } from '../../proto/index.js';
import { systemClock } from '../../shared/clock.js';
import {
  createTestNamespace,
  criLine,
  eventually,
  loadKubeConfig,
  serveLogsFromFile,
  type TestNamespace,
  waitForRunningPods,
} from '../helpers/kube.js';

const kc = loadKubeConfig(inject('kubeconfigPath'));
const core = kc.makeApiClient(CoreV1Api);
const logger = pino({ level: 'silent' });
const PODS = 50;
const CONTAINERS_PER_POD = 5;
const CAP = 200;

let ns: TestNamespace;
let scratch: string;

beforeAll(async () => {
  ns = await createTestNamespace(kc, 'podlogs-scale');
  scratch = await mkdtemp(join(tmpdir(), 'kubexa-podlogs-scale-'));
  const logsFile = join(scratch, 'app.log');
  await writeFile(logsFile, criLine(new Date(Date.now() - 1_000), 'hello'));
  await serveLogsFromFile(kc, { namespace: ns.name, logsFile });
  const containers = Array.from({ length: CONTAINERS_PER_POD }, (_, i) => ({
    name: `c${String(i)}`,
    image: 'registry.invalid/app:1',
  }));
  for (let first = 0; first < PODS; first += 10) {
    await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        core.createNamespacedPod({
          namespace: ns.name,
          body: {
            metadata: { name: `p${String(first + i)}` },
            spec: {
              containers,
              tolerations: [
                { key: 'kwok.x-k8s.io/node', operator: 'Exists', effect: 'NoSchedule' },
              ],
            },
          },
        }),
      ),
    );
  }
  await waitForRunningPods(kc, ns.name, PODS, 90_000);
});

afterAll(async () => {
  await ns.delete();
  await rm(scratch, { recursive: true, force: true });
});

/** The real access, with the log requests open against the API server counted. */
function countingAccess(): { kube: PodLogKubeAccess; open: () => number; mostOpen: () => number } {
  const real = kubePodLogAccess(kc);
  let open = 0;
  let mostOpen = 0;
  return {
    open: () => open,
    mostOpen: () => mostOpen,
    kube: {
      ...real,
      logs: {
        async read(request, signal, onChunk) {
          open++;
          mostOpen = Math.max(mostOpen, open);
          try {
            await real.logs.read(request, signal, onChunk);
          } finally {
            open--;
          }
        },
      },
    },
  };
}

describe('pod log source at scale', () => {
  it('250 containers, cap 200: never more than 200 streams, and every container collected', async () => {
    const collected = new Set<string>();
    const access = countingAccess();
    const source = createPodLogSource(
      {
        logs: {
          tail_lines: 10,
          follow: true,
          exclude_namespaces: [],
          checkpoint_dir: '',
          rules: [
            {
              id: 'all',
              namespace: ns.name,
              pod_names: [],
              label_selector: '',
              field_selector: '',
              containers: [],
            },
          ],
        },
        identity: { clusterId: 'c', agentId: 'a' },
        maxConcurrentStreams: CAP,
        fairnessSliceMs: 1_000,
        flushIntervalMs: 100,
      },
      {
        logger,
        clock: systemClock,
        kube: access.kube,
        sink: {
          enqueue(item: BufferItem) {
            const message = AgentMessage.decode(item.payload);
            if (message.payload?.$case !== 'logs') return;
            for (const e of message.payload.value.entries) {
              if (e.raw.toString() === 'hello') collected.add(`${e.podName}/${e.container}`);
            }
          },
        },
      },
    );
    const samples = { count: 0, mostActive: 0, mostOpen: 0, mostQueued: 0 };
    const sampler = setInterval(() => {
      samples.count++;
      samples.mostActive = Math.max(samples.mostActive, source.stats().activeStreams);
      samples.mostOpen = Math.max(samples.mostOpen, access.open());
      samples.mostQueued = Math.max(samples.mostQueued, source.stats().queuedContainers);
    }, 10);
    try {
      await source.start(AbortSignal.timeout(120_000));
      await eventually(
        'all 250 containers collected',
        () => Promise.resolve(collected.size === PODS * CONTAINERS_PER_POD || undefined),
        { timeoutMs: 90_000, intervalMs: 200 },
      );
      const stats = source.stats();
      // The cap was reached (250 wanted at once), and never passed.
      expect(stats.maxActiveStreams).toBe(CAP);
      expect(stats.activeStreams).toBeLessThanOrEqual(CAP);
      expect(samples.mostActive).toBeLessThanOrEqual(CAP);
      expect(access.mostOpen()).toBeLessThanOrEqual(CAP);
      // 50 waited for a slot, and got one only by the rotation.
      expect(samples.mostQueued).toBe(PODS * CONTAINERS_PER_POD - CAP);
    } finally {
      clearInterval(sampler);
      await source.close();
    }
  });
});
