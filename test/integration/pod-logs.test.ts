// The pod log source against the real API server, kwok serving container logs from a file.
import { appendFile, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { DurableBuffer } from '../../collector/buffer/durable-buffer.js';
import { kubePodLogAccess } from '../../collector/sources/pod-logs/kube-access.js';
import {
  createPodLogSource,
  noopPodLogCounters,
  type PodLogCounters,
  type PodLogSourceOptions,
} from '../../collector/sources/pod-logs/pod-log-source.js';
import type { LogRuleConfig } from '../../collector/sources/pod-logs/eligibility.js';
import { AgentMessage } from '../../proto/index.js';
import { systemClock } from '../../shared/clock.js';
import {
  createTestNamespace,
  criLine,
  eventually,
  loadKubeConfig,
  serveLogsFromFile,
  type TestNamespace,
} from '../helpers/kube.js';
import { startTcpProxy } from '../helpers/tcp-proxy.js';

const kc = loadKubeConfig(inject('kubeconfigPath'));
const core = kc.makeApiClient(CoreV1Api);
const logger = pino({ level: 'silent' });

let ns: TestNamespace;
let scratch: string;
let logsFile: string;

beforeAll(async () => {
  ns = await createTestNamespace(kc, 'podlogs');
  scratch = await mkdtemp(join(tmpdir(), 'kubexa-podlogs-'));
  logsFile = join(scratch, 'app.log');
  const start = Date.now() - 10_000;
  await writeFile(
    logsFile,
    [0, 1, 2, 3, 4].map((i) => criLine(new Date(start + i), `old-${String(i)}`)).join(''),
  );
  await serveLogsFromFile(kc, { namespace: ns.name, logsFile });
  for (const [name, app] of [
    ['keep-1', 'keep'],
    ['skip-1', 'skip'],
  ] as const) {
    await core.createNamespacedPod({
      namespace: ns.name,
      body: {
        metadata: { name, labels: { app } },
        spec: {
          containers: [
            { name: 'app', image: 'registry.invalid/app:1' },
            { name: 'sidecar', image: 'registry.invalid/side:1' },
          ],
          tolerations: [{ key: 'kwok.x-k8s.io/node', operator: 'Exists', effect: 'NoSchedule' }],
        },
      },
    });
  }
  await eventually(
    'pods running',
    async () => {
      const pods = await core.listNamespacedPod({ namespace: ns.name });
      return pods.items.filter((p) => p.status?.phase === 'Running').length === 2 || undefined;
    },
    { timeoutMs: 60_000 },
  );
});

afterAll(async () => {
  await ns.delete();
  await rm(scratch, { recursive: true, force: true });
});

/** An in-process gateway: takes from the buffer, stores each message_id once, acks. */
function drain(buffer: DurableBuffer, seen: Map<string, string[]>): () => void {
  const timer = setInterval(() => {
    const items = buffer.take(100);
    for (const item of items) {
      if (seen.has(item.id)) continue;
      const message = AgentMessage.decode(item.payload);
      const entries = message.payload?.$case === 'logs' ? message.payload.value.entries : [];
      seen.set(
        item.id,
        entries.map((e) => `${e.podName}/${e.container}/${e.raw.toString()}`),
      );
    }
    buffer.ack(items.map((i) => i.id));
  }, 50);
  return () => {
    clearInterval(timer);
  };
}

function options(rules: LogRuleConfig[], checkpointDir: string): PodLogSourceOptions {
  return {
    logs: {
      tail_lines: 3,
      follow: true,
      exclude_namespaces: [],
      checkpoint_dir: checkpointDir,
      rules,
    },
    identity: { clusterId: 'c', agentId: 'a' },
    flushIntervalMs: 100,
  };
}

interface RunExtras {
  readonly kc?: KubeConfig;
  readonly options?: Partial<PodLogSourceOptions>;
  readonly counters?: PodLogCounters;
}

function run(rules: LogRuleConfig[], dir: string, extras: RunExtras = {}) {
  const buffer = new DurableBuffer(
    { path: join(dir, 'buffer.db'), maxMemoryBytes: 1 << 20, maxDiskBytes: 64 << 20 },
    { logger },
  );
  const source = createPodLogSource(
    { ...options(rules, join(dir, 'checkpoints')), ...extras.options },
    {
      logger,
      clock: systemClock,
      sink: buffer,
      releases: buffer,
      kube: kubePodLogAccess(extras.kc ?? kc),
      counters: extras.counters ?? noopPodLogCounters,
    },
  );
  return { buffer, source };
}

const keepRule = (): LogRuleConfig => ({
  id: 'keep',
  namespace: ns.name,
  pod_names: ['keep-*'],
  label_selector: 'app=keep',
  field_selector: '',
  containers: ['ap?'],
});

let lineNo = 0;
async function appendNumbered(count: number): Promise<void> {
  // Several lines per millisecond timestamp and per second: the hard case for sinceTime.
  const at = new Date();
  let text = '';
  for (let i = 0; i < count; i++) text += criLine(at, `n-${String(lineNo++)}`);
  await appendFile(logsFile, text);
}

/** The numbers of the `n-<k>` lines delivered, k >= from, in delivery order. */
function numbersFrom(seen: Map<string, string[]>, from: number): number[] {
  return [...seen.values()]
    .flat()
    .map((l) => l.split('/')[2] ?? '')
    .filter((t) => t.startsWith('n-'))
    .map((t) => Number(t.slice(2)))
    .filter((n) => n >= from);
}

/** Appends 4 lines per millisecond timestamp every 30 ms until stopped. */
function steadyWriter(): { stop(): Promise<void> } {
  const writing = new AbortController();
  const done = (async () => {
    while (!writing.signal.aborted) {
      await appendNumbered(4);
      await new Promise((resolve) => setTimeout(resolve, 30));
    }
  })();
  return {
    async stop() {
      writing.abort();
      await done;
    },
  };
}

const delivered = (seen: Map<string, string[]>, n: number) => () =>
  Promise.resolve(numbersFrom(seen, 0).includes(n) || undefined);

describe('pod log source', () => {
  it('tails on first sight, follows appended lines, and selects exactly the intended containers', async () => {
    const dir = await mkdtemp(join(scratch, 'a-'));
    const seen = new Map<string, string[]>();
    const { buffer, source } = run([keepRule()], dir);
    const stop = drain(buffer, seen);
    try {
      await source.start(AbortSignal.timeout(120_000));
      const all = () => [...seen.values()].flat();
      await eventually('the tail', () => Promise.resolve(all().length >= 3 || undefined), {
        timeoutMs: 30_000,
      });
      await appendNumbered(3);
      const lines = await eventually(
        'appended lines',
        () => Promise.resolve(all().some((l) => l.endsWith('n-2')) ? all() : undefined),
        { timeoutMs: 30_000 },
      );
      expect(new Set(lines.map((l) => l.split('/').slice(0, 2).join('/')))).toEqual(
        new Set(['keep-1/app']),
      );
      expect(lines.map((l) => l.split('/')[2])).toEqual([
        'old-2',
        'old-3',
        'old-4',
        'n-0',
        'n-1',
        'n-2',
      ]);
      expect(source.up()).toBe(true);
    } finally {
      stop();
      await source.close();
      await buffer.close();
    }
  });

  it('a restart of the source on the same checkpoint DB delivers every line exactly once, in order', async () => {
    const dir = await mkdtemp(join(scratch, 'b-'));
    const seen = new Map<string, string[]>();
    const firstLine = lineNo;
    const writing = new AbortController();
    const writer = (async () => {
      while (!writing.signal.aborted) {
        await appendNumbered(4);
        await new Promise((resolve) => setTimeout(resolve, 30));
      }
    })();
    try {
      for (let round = 0; round < 3; round++) {
        // A tail longer than the file: the first sight reads everything written so far.
        const { buffer, source } = run([{ ...keepRule(), tail_lines: 100_000 }], dir);
        const stop = drain(buffer, seen);
        await source.start(AbortSignal.timeout(120_000));
        const target = lineNo + 20;
        await eventually(
          `round ${String(round)} to catch up`,
          () =>
            Promise.resolve(
              [...seen.values()].flat().some((l) => l.endsWith(`/n-${String(target)}`)) ||
                undefined,
            ),
          { timeoutMs: 30_000 },
        );
        await source.close();
        stop();
        await buffer.close();
      }
    } finally {
      writing.abort();
      await writer;
    }
    // The last run stopped mid-stream: compare the delivered prefix with what was written.
    const numbers = [...seen.values()]
      .flat()
      .map((l) => l.split('/')[2] ?? '')
      .filter((t) => t.startsWith('n-'))
      .map((t) => Number(t.slice(2)))
      .filter((n) => n >= firstLine);
    const last = numbers.at(-1) ?? -1;
    expect(numbers.length).toBeGreaterThan(60);
    expect(numbers).toEqual(Array.from({ length: last - firstLine + 1 }, (_, i) => firstLine + i));
  });

  it('a follow stream cut while the container runs, or gone silent, resumes with no loss or duplicate', async () => {
    const dir = await mkdtemp(join(scratch, 'c-'));
    const seen = new Map<string, string[]>();
    const proxy = await startTcpProxy(kc);
    const errors: string[] = [];
    const counts = { reconnects: 0 };
    const { buffer, source } = run([{ ...keepRule(), tail_lines: 100_000 }], dir, {
      kc: proxy.kubeConfig,
      options: { streamIdleTimeoutMs: 1_500 },
      counters: {
        ...noopPodLogCounters,
        streamErrors: (kind) => errors.push(kind),
        reconnects: (n) => {
          counts.reconnects += n;
        },
      },
    });
    const stop = drain(buffer, seen);
    const firstLine = lineNo;
    const writer = steadyWriter();
    try {
      await source.start(AbortSignal.timeout(120_000));
      await eventually('the first lines', delivered(seen, firstLine + 20), { timeoutMs: 30_000 });
      // Connection resets (a proxy or an API server restart) while lines keep coming.
      for (let cut = 0; cut < 2; cut++) {
        const cutsBefore = errors.filter((e) => e === 'cut').length;
        proxy.cut();
        await eventually(
          'the cut to be seen',
          () => Promise.resolve(errors.filter((e) => e === 'cut').length > cutsBefore || undefined),
          { timeoutMs: 30_000 },
        );
        await eventually('lines after the cut', delivered(seen, lineNo + 20), {
          timeoutMs: 30_000,
        });
      }
      // A half-open connection: nothing arrives and nothing fails; the idle watchdog closes it.
      const reconnectsBefore = counts.reconnects;
      proxy.freeze();
      await eventually('lines after the freeze', delivered(seen, lineNo + 20), {
        timeoutMs: 30_000,
      });
      expect(counts.reconnects).toBeGreaterThan(reconnectsBefore);
    } finally {
      await writer.stop();
    }
    const last = lineNo - 1;
    await eventually('every line written', delivered(seen, last), { timeoutMs: 30_000 });
    stop();
    await source.close();
    await buffer.close();
    await proxy.close();
    const numbers = numbersFrom(seen, firstLine);
    expect(numbers).toEqual(Array.from({ length: last - firstLine + 1 }, (_, i) => firstLine + i));
    expect(errors.filter((e) => e === 'cut').length).toBeGreaterThanOrEqual(2);
  });
});
