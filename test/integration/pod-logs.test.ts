// The pod log source against the real API server, kwok serving container logs from a file.
import { appendFile, copyFile, mkdtemp, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import Database from 'better-sqlite3';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { DurableBuffer } from '../../collector/buffer/durable-buffer.js';
import {
  kubePodLogAccess,
  type LogRequest,
  type PodLogKubeAccess,
} from '../../collector/sources/pod-logs/kube-access.js';
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
  waitForRunningPods,
} from '../helpers/kube.js';
import { startTcpProxy } from '../helpers/tcp-proxy.js';
import { steadyWriter, until } from '../helpers/wait.js';

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
  await waitForRunningPods(kc, ns.name, 2);
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
  readonly kube?: PodLogKubeAccess;
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
      kube: extras.kube ?? kubePodLogAccess(extras.kc ?? kc),
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
    const writer = steadyWriter(() => appendNumbered(4));
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
      await writer.stop();
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
    const writer = steadyWriter(() => appendNumbered(4));
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

/** The real API access, recording every log request in order. */
function recordingKube(requests: LogRequest[], config: KubeConfig = kc): PodLogKubeAccess {
  const real = kubePodLogAccess(config);
  return {
    ...real,
    logs: {
      read: (request, signal, onChunk) => {
        requests.push(request);
        return real.logs.read(request, signal, onChunk);
      },
    },
  };
}

/** The stored checkpoint of one instance: position (sec.nanos/count) and finished flag. */
function storedInstance(dir: string, restartCount: number) {
  const db = new Database(join(dir, 'checkpoints', 'pod-logs.db'), { readonly: true });
  try {
    return db
      .prepare<[number], { sec: number; nanos: number; count: number; finished: number }>(
        'SELECT sec, nanos, count, finished FROM checkpoints WHERE restart_count = ?',
      )
      .get(restartCount);
  } finally {
    db.close();
  }
}

/**
 * A restarting container's runtime files: instance 0 (`app-0.log`, lines r-1..r-3), an empty
 * `previous.log`, and `current.log`, a symlink to instance 0. kwok resolves the symlink when a
 * request opens it, so a follow stream of instance 0 stays on its own file when a test points
 * the symlink at the next instance.
 */
async function runtimeFiles(prefix: string) {
  const dir = await mkdtemp(join(scratch, prefix));
  const current = join(dir, 'current.log');
  const previous = join(dir, 'previous.log');
  const base = Date.now() - 5_000;
  const at = (ms: number): Date => new Date(base + ms);
  await writeFile(
    join(dir, 'app-0.log'),
    [1, 2, 3].map((i) => criLine(at(i), `r-${String(i)}`)).join(''),
  );
  await writeFile(previous, '');
  await symlink('app-0.log', current);
  return { dir, current, previous, at };
}

/** Pod `<app>-1` (label app=<app>) whose container log kwok serves from the runtime files. */
async function startRestartingPod(
  namespace: string,
  app: string,
  files: { current: string; previous: string },
): Promise<void> {
  await serveLogsFromFile(kc, {
    namespace,
    logsFile: files.current,
    previousLogsFile: files.previous,
  });
  await core.createNamespacedPod({
    namespace,
    body: {
      metadata: { name: `${app}-1`, labels: { app } },
      spec: {
        containers: [{ name: 'app', image: 'registry.invalid/app:1' }],
        tolerations: [{ key: 'kwok.x-k8s.io/node', operator: 'Exists', effect: 'NoSchedule' }],
      },
    },
  });
}

describe('pod log source, container restart', () => {
  it('finishes the previous instance with previous=true and starts the new one from its beginning', async () => {
    const restartNs = await createTestNamespace(kc, 'podlogs-restart');
    const { dir, current, previous, at } = await runtimeFiles('r-');
    const seen = new Map<string, string[]>();
    const requests: LogRequest[] = [];
    try {
      await startRestartingPod(restartNs.name, 'restart', { current, previous });
      await eventually(
        'pod running',
        async () => {
          const pod = await core.readNamespacedPod({
            name: 'restart-1',
            namespace: restartNs.name,
          });
          return pod.status?.containerStatuses?.[0]?.state?.running ? pod : undefined;
        },
        { timeoutMs: 60_000 },
      );
      const rule: LogRuleConfig = {
        id: 'restart',
        namespace: restartNs.name,
        pod_names: [],
        label_selector: 'app=restart',
        field_selector: '',
        containers: [],
        tail_lines: 100,
      };
      const texts = (): string[] =>
        [...seen.values()].flat().map((l) => l.split('/').slice(2).join('/'));
      const has = (text: string) => () => Promise.resolve(texts().includes(text) || undefined);

      const first = run([rule], dir, { kube: recordingKube(requests) });
      const stopFirst = drain(first.buffer, seen);
      await first.source.start(AbortSignal.timeout(120_000));
      await eventually('lines 1..3', has('r-3'), { timeoutMs: 30_000 });
      // The container writes r-4 (the follow stream may or may not read it) and r-5 (written
      // after the stream's last read: only previous=true can deliver it), then stops. Its log
      // becomes the previous one, and instance 1 starts a new file with A, B.
      await appendFile(join(dir, 'app-0.log'), criLine(at(4), 'r-4'));
      await copyFile(join(dir, 'app-0.log'), previous);
      await appendFile(previous, criLine(at(5), 'r-5'));
      await writeFile(
        join(dir, 'app-1.log'),
        criLine(new Date(), 'A') + criLine(new Date(Date.now() + 1), 'B'),
      );
      await symlink('app-1.log', join(dir, 'current.next'));
      await rename(join(dir, 'current.next'), current);
      const pod = await core.readNamespacedPod({ name: 'restart-1', namespace: restartNs.name });
      const status = pod.status?.containerStatuses?.[0];
      if (!status) throw new Error('no container status');
      status.restartCount = 1;
      status.containerID = 'kwok://restarted-1';
      await core.replaceNamespacedPodStatus({
        name: 'restart-1',
        namespace: restartNs.name,
        body: pod,
      });
      await eventually('the new instance', has('B'), { timeoutMs: 30_000 });
      await eventually('the end of the previous instance', has('r-5'), { timeoutMs: 30_000 });
      // Finished once its batches are released (acked here): stored, so a restart skips it.
      await eventually(
        'the previous instance marked finished',
        () => Promise.resolve(storedInstance(dir, 0)?.finished === 1 || undefined),
        { timeoutMs: 30_000 },
      );
      await eventually(
        'the new instance checkpointed',
        () => Promise.resolve(storedInstance(dir, 1) ?? undefined),
        { timeoutMs: 30_000 },
      );
      stopFirst();
      await first.source.close();
      await first.buffer.close();

      expect(texts().filter((t) => t.startsWith('r-'))).toEqual([
        'r-1',
        'r-2',
        'r-3',
        'r-4',
        'r-5',
      ]);
      expect(texts().filter((t) => !t.startsWith('r-'))).toEqual(['A', 'B']);
      const previousReads = requests.filter((r) => r.previous === true);
      expect(previousReads.length).toBeGreaterThanOrEqual(1);
      // Resumed from its position (the second of r-3), not tailed; read to its end.
      expect(previousReads[0]).toMatchObject({ follow: false });
      expect(previousReads[0]?.tailLines).toBeUndefined();
      expect(previousReads[0]?.sinceTime?.getTime()).toBe(
        Math.floor(at(3).getTime() / 1000) * 1000,
      );
      // The instance's checkpoint is r-5's position: 4 and 5 went out under instance 0.
      const r5 = at(5);
      expect(storedInstance(dir, 0)).toMatchObject({
        sec: Math.floor(r5.getTime() / 1000),
        nanos: (r5.getTime() % 1000) * 1_000_000,
      });
      // The new instance was read from its beginning: no tail, no sinceTime.
      const lastPrevious = requests.findLastIndex((r) => r.previous === true);
      const newInstance = requests[lastPrevious + 1];
      expect(newInstance).toMatchObject({ follow: true });
      expect(newInstance?.tailLines).toBeUndefined();
      expect(newInstance?.sinceTime).toBeUndefined();

      // A restart of the collector does not read the finished instance again.
      const before = requests.length;
      const second = run([rule], dir, { kube: recordingKube(requests) });
      const stopSecond = drain(second.buffer, seen);
      await second.source.start(AbortSignal.timeout(120_000));
      await eventually(
        'the new instance resumed',
        () => Promise.resolve(requests.length > before || undefined),
        { timeoutMs: 30_000 },
      );
      stopSecond();
      await second.source.close();
      await second.buffer.close();
      expect(requests.slice(before)[0]).toMatchObject({ follow: true });
      expect(requests.slice(before)[0]?.previous).toBeUndefined();
      expect(requests.slice(before)[0]?.sinceTime).toBeDefined();
      expect(texts().filter((t) => t.startsWith('r-'))).toEqual([
        'r-1',
        'r-2',
        'r-3',
        'r-4',
        'r-5',
      ]);
      expect(texts().filter((t) => !t.startsWith('r-'))).toEqual(['A', 'B']);
    } finally {
      await restartNs.delete();
    }
  });
  it('a stream reopened before the watch reports the restart misreads the new instance: every line still arrives once', async () => {
    const raceNs = await createTestNamespace(kc, 'podlogs-race');
    const { dir, current, previous, at } = await runtimeFiles('m-');
    const proxy = await startTcpProxy(kc);
    const seen = new Map<string, string[]>();
    const requests: LogRequest[] = [];
    const errors: string[] = [];
    const a = new Date();
    const b = new Date(a.getTime() + 1);
    const c = new Date(a.getTime() + 2);
    try {
      await startRestartingPod(raceNs.name, 'race', { current, previous });
      await waitForRunningPods(kc, raceNs.name, 1);
      const rule: LogRuleConfig = {
        id: 'race',
        namespace: raceNs.name,
        pod_names: [],
        label_selector: 'app=race',
        field_selector: '',
        containers: [],
        tail_lines: 100,
      };
      const texts = (): string[] =>
        [...seen.values()].flat().map((l) => l.split('/').slice(2).join('/'));
      const has = (text: string) => () => Promise.resolve(texts().includes(text) || undefined);
      const { buffer, source } = run([rule], dir, {
        kube: recordingKube(requests, proxy.kubeConfig),
        counters: { ...noopPodLogCounters, streamErrors: (kind) => errors.push(kind) },
      });
      const stop = drain(buffer, seen);
      try {
        await source.start(AbortSignal.timeout(120_000));
        await eventually('lines 1..3', has('r-3'), { timeoutMs: 30_000 });
        // The container writes r-4 and stops (our stream never reads r-4), and instance 1
        // starts with A, B: the runtime's files are swapped before the pod status says so.
        await copyFile(join(dir, 'app-0.log'), previous);
        await appendFile(previous, criLine(at(4), 'r-4'));
        await writeFile(join(dir, 'app-1.log'), criLine(a, 'A') + criLine(b, 'B'));
        await symlink('app-1.log', join(dir, 'current.next'));
        await rename(join(dir, 'current.next'), current);
        // The stream is cut and reopened from the second of r-3, still as instance 0: the log
        // API names no instance, and the API server serves instance 1's log.
        proxy.cut();
        await eventually('A and B read as instance 0', has('B'), { timeoutMs: 30_000 });
        expect(errors).toContain('cut');
        await eventually(
          "instance 0's checkpoint at B",
          () =>
            Promise.resolve(
              storedInstance(dir, 0)?.nanos === (b.getTime() % 1000) * 1e6 || undefined,
            ),
          { timeoutMs: 30_000 },
        );
        expect(requests.filter((r) => r.previous === true)).toEqual([]);
        // Now the watch reports the restart.
        const pod = await core.readNamespacedPod({ name: 'race-1', namespace: raceNs.name });
        const status = pod.status?.containerStatuses?.[0];
        if (!status) throw new Error('no container status');
        status.restartCount = 1;
        status.containerID = 'kwok://restarted-1';
        await core.replaceNamespacedPodStatus({
          name: 'race-1',
          namespace: raceNs.name,
          body: pod,
        });
        // Once the stream of instance 0 is closed (the previous read follows it), instance 1
        // writes C: only instance 1's own stream can read it.
        await eventually(
          'the previous read',
          () => Promise.resolve(requests.some((r) => r.previous === true) || undefined),
          { timeoutMs: 30_000 },
        );
        await appendFile(join(dir, 'app-1.log'), criLine(c, 'C'));
        await eventually('C from instance 1', has('C'), { timeoutMs: 30_000 });
        await eventually(
          'instance 0 marked finished',
          () => Promise.resolve(storedInstance(dir, 0)?.finished === 1 || undefined),
          { timeoutMs: 30_000 },
        );
      } finally {
        stop();
        await source.close();
        await buffer.close();
      }
      expect(texts()).toEqual(['r-1', 'r-2', 'r-3', 'A', 'B', 'r-4', 'C']);
      // Instance 0 was read twice with previous=true: from B's second (it ends before it: a
      // misread), then from r-3's, where the misreading connection began.
      const previousReads = requests.filter((r) => r.previous === true);
      expect(previousReads.map((r) => r.sinceTime?.getTime())).toEqual([
        Math.floor(b.getTime() / 1000) * 1000,
        Math.floor(at(3).getTime() / 1000) * 1000,
      ]);
      // Instance 1 resumed after B (its stored skip), and its checkpoint went on to C.
      const lastPrevious = requests.findLastIndex((r) => r.previous === true);
      expect(requests[lastPrevious + 1]).toMatchObject({ follow: true });
      expect(requests[lastPrevious + 1]?.previous).toBeUndefined();
      expect(requests[lastPrevious + 1]?.sinceTime?.getTime()).toBe(
        Math.floor(b.getTime() / 1000) * 1000,
      );
      expect(storedInstance(dir, 1)).toMatchObject({
        sec: Math.floor(c.getTime() / 1000),
        nanos: (c.getTime() % 1000) * 1_000_000,
      });
    } finally {
      await proxy.close();
      await raceNs.delete();
    }
  });
});

describe('pod log source, checkpoints of pods deleted while it was down', () => {
  it('removes them after the first pod list, and keeps those of pods still there', async () => {
    const sweepNs = await createTestNamespace(kc, 'podlogs-sweep');
    const dir = await mkdtemp(join(scratch, 'sweep-'));
    const podUids = (): string[] => {
      const db = new Database(join(dir, 'checkpoints', 'pod-logs.db'), { readonly: true });
      try {
        return db
          .prepare<[], { pod_uid: string }>(
            'SELECT pod_uid FROM checkpoints UNION SELECT pod_uid FROM intents ORDER BY 1',
          )
          .all()
          .map((row) => row.pod_uid);
      } finally {
        db.close();
      }
    };
    const rule: LogRuleConfig = { ...keepRule(), namespace: sweepNs.name };
    try {
      await serveLogsFromFile(kc, { namespace: sweepNs.name, logsFile });
      const uids = new Map<string, string>();
      for (const name of ['keep-stays', 'keep-goes']) {
        const created = await core.createNamespacedPod({
          namespace: sweepNs.name,
          body: {
            metadata: { name, labels: { app: 'keep' } },
            spec: {
              containers: [{ name: 'app', image: 'registry.invalid/app:1' }],
              tolerations: [
                { key: 'kwok.x-k8s.io/node', operator: 'Exists', effect: 'NoSchedule' },
              ],
            },
          },
        });
        uids.set(name, created.metadata?.uid ?? '');
      }
      await waitForRunningPods(kc, sweepNs.name, 2);
      const both = [...uids.values()].sort();
      // First run: both pods' lines delivered and released, so both have checkpoints.
      const first = run([rule], dir);
      const stop = drain(first.buffer, new Map());
      await first.source.start(AbortSignal.timeout(120_000));
      await eventually(
        'checkpoints of both pods',
        () => Promise.resolve(podUids().length === 2 || undefined),
        { timeoutMs: 30_000 },
      );
      stop();
      await first.source.close();
      await first.buffer.close();
      expect(podUids()).toEqual(both);
      // While the collector is down, one pod is deleted.
      await core.deleteNamespacedPod({
        name: 'keep-goes',
        namespace: sweepNs.name,
        gracePeriodSeconds: 0,
      });
      await eventually(
        'the pod to be gone',
        async () => {
          const pods = await core.listNamespacedPod({ namespace: sweepNs.name });
          return pods.items.every((p) => p.metadata?.name !== 'keep-goes') || undefined;
        },
        { timeoutMs: 60_000 },
      );
      const second = run([rule], dir);
      try {
        await second.source.start(AbortSignal.timeout(120_000));
        await eventually(
          'the first pod list',
          () => Promise.resolve(second.source.up() || undefined),
          {
            timeoutMs: 30_000,
          },
        );
        await eventually(
          'the deleted pod swept',
          () => Promise.resolve(podUids().length === 1 || undefined),
          { timeoutMs: 30_000 },
        );
        expect(podUids()).toEqual([uids.get('keep-stays')]);
      } finally {
        await second.source.close();
        await second.buffer.close();
      }
    } finally {
      await sweepNs.delete();
    }
  });
});

describe('pod log source, a stream that ends with nothing new (issue #9)', () => {
  it('backs off a follow stream cut right after re-sending what was read, and logs it once', async () => {
    // A kubelet ends the follow stream of a container that is not running right after sending
    // its log again. kwok always follows, so the TCP proxy ends each connection once the
    // re-sent lines have arrived: the collector sees only lines it has, then the end.
    const quietNs = await createTestNamespace(kc, 'podlogs-quiet');
    const dir = await mkdtemp(join(scratch, 'quiet-'));
    const quietLog = join(dir, 'quiet.log');
    const base = Math.floor(Date.now() / 1000) * 1000 - 5_000;
    await writeFile(
      quietLog,
      [1, 2, 3].map((i) => criLine(new Date(base + i), `q-${String(i)}`)).join(''),
    );
    const proxy = await startTcpProxy(kc);
    const requests: LogRequest[] = [];
    const backoffs: string[] = [];
    const sleeps: number[] = [];
    const logged: string[] = [];
    let linesRead = 0;
    const buffer = new DurableBuffer(
      { path: join(dir, 'buffer.db'), maxMemoryBytes: 1 << 20, maxDiskBytes: 64 << 20 },
      { logger },
    );
    const seen = new Map<string, string[]>();
    const stop = drain(buffer, seen);
    const source = createPodLogSource(
      options([{ ...keepRule(), namespace: quietNs.name }], join(dir, 'checkpoints')),
      {
        logger: pino({ level: 'info' }, { write: (text: string) => logged.push(text) }),
        // The real clock, recording the sleeps the source asks for.
        clock: {
          now: () => systemClock.now(),
          sleep: (ms, signal) => {
            sleeps.push(ms);
            return systemClock.sleep(ms, signal);
          },
        },
        sink: buffer,
        releases: buffer,
        // Only the log reads go through the proxy; the pod watch does not see its cuts.
        kube: { ...kubePodLogAccess(kc), logs: recordingKube(requests, proxy.kubeConfig).logs },
        counters: {
          ...noopPodLogCounters,
          linesRead: (n) => {
            linesRead += n;
          },
          streamBackoffs: (state) => backoffs.push(state),
        },
      },
    );
    try {
      await serveLogsFromFile(kc, { namespace: quietNs.name, logsFile: quietLog });
      await core.createNamespacedPod({
        namespace: quietNs.name,
        body: {
          metadata: { name: 'keep-quiet', labels: { app: 'keep' } },
          spec: {
            containers: [{ name: 'app', image: 'registry.invalid/app:1' }],
            tolerations: [{ key: 'kwok.x-k8s.io/node', operator: 'Exists', effect: 'NoSchedule' }],
          },
        },
      });
      await waitForRunningPods(kc, quietNs.name, 1);
      await source.start(AbortSignal.timeout(120_000));
      await until(() => linesRead >= 3, 'the first read', { intervalMs: 50 });
      // New lines, then the end: reopened at once.
      proxy.cut();
      for (let round = 0; round < 3; round++) {
        await until(
          () => {
            return requests.length === round + 2 && linesRead >= 3 * (round + 2);
          },
          `reconnect ${String(round + 1)} re-sent the lines`,
          { intervalMs: 50 },
        );
        proxy.cut();
        await until(() => backoffs.length === round + 1, `backoff ${String(round + 1)}`, {
          intervalMs: 50,
        });
      }
      await until(() => requests.length === 5, 'the reconnect after the last backoff', {
        intervalMs: 50,
      });
      // Each reopening after a read of old lines only waited for its backoff (1 s doubling,
      // jittered by +-20 %), and came from the position.
      const backoffSleeps = sleeps.filter((ms) => ms >= 500 && ms < 60_000);
      expect(backoffSleeps).toHaveLength(3);
      backoffSleeps.forEach((ms, i) => {
        expect(ms).toBeGreaterThanOrEqual(800 * 2 ** i);
        expect(ms).toBeLessThanOrEqual(1_200 * 2 ** i);
      });
      expect(requests.slice(1).every((r) => r.sinceTime?.getTime() === base)).toBe(true);
      expect(backoffs).toEqual(['running', 'running', 'running']);
      const quiet = logged.filter((l) => l.includes('ended with nothing new'));
      expect(quiet).toHaveLength(1);
      expect(quiet[0]).toContain('"reason":"cut, container running"');
      expect([...seen.values()].flat().map((l) => l.split('/')[2])).toEqual(['q-1', 'q-2', 'q-3']);
    } finally {
      stop();
      await source.close();
      await buffer.close();
      await proxy.close();
      await quietNs.delete();
    }
  });
});
