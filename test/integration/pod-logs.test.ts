// The pod log source against the real API server, kwok serving container logs from a file.
import { appendFile, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { DurableBuffer } from '../../collector/buffer/durable-buffer.js';
import { kubePodLogAccess } from '../../collector/sources/pod-logs/kube-access.js';
import {
  createPodLogSource,
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

function run(rules: LogRuleConfig[], dir: string) {
  const buffer = new DurableBuffer(
    { path: join(dir, 'buffer.db'), maxMemoryBytes: 1 << 20, maxDiskBytes: 64 << 20 },
    { logger },
  );
  const source = createPodLogSource(options(rules, join(dir, 'checkpoints')), {
    logger,
    clock: systemClock,
    sink: buffer,
    releases: buffer,
    kube: kubePodLogAccess(kc),
  });
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
});
