// Pod logs end to end, against the real test cluster (kube-apiserver + kwok on loopback) and the
// real collector process (`node --import tsx collector/main.ts`) shipping to an in-process demo
// gateway with acks on. Every collector figure stands beside a bare reader that only counts lines
// (the collector's own PodLogHttp, `follow=true` as the collector reads), measured the same way
// over the same span, in interleaved rounds after an unmeasured warm-up round of each; medians.
//
// THE CPU TARGET (issue 5, fixed here once, before measuring; a miss is reported as a miss):
//   while the cluster delivers a steady TARGET_RATE = 60,000 lines/s of 100-byte lines (4
//   followed containers x 15,000 lines/s, appended by a rate-limited writer process to the file
//   kwok follows: the highest rate this test cluster delivered to a bare follow reader, 61-69k
//   lines/s, rounded down), the collector uses under 50 % of one core (its user + system CPU
//   over a WINDOW_MS window that starts WARMUP_MS after the writer), and it keeps up: it ships at
//   least 95 % of TARGET_RATE to the gateway over that window. Both rows must say "met". The
//   same writer, rate, warm-up and window serve the bare reader, whose CPU is the baseline and
//   whose rate shows whether the cluster delivered TARGET_RATE at all. Each side gets an emptied
//   file and (the collector) a fresh process every round, so kwok serves both the same way.
//
// Also measured:
// - backlog throughput: a fresh collector ships 4 x BACKLOG_LINES lines already in the log, as
//   fast as the cluster delivers them, from its first stored message to its last; the bare reader
//   reads the same backlog from its first chunk to its last line. The collector's peak RSS is
//   VmHWM over that burst only (reset through /proc/<pid>/clear_refs at the first message).
// - RSS with 200 open follow streams (40 pods x 5 containers), beside the same collector with log
//   collection disabled, both read after the same settle time.
// On 2 shared cores the API server and kwok (their CPU is printed too), the writer, the bench
// process (demo gateway, bare reader) and the collector compete for the same cores.
//
// The cluster lives in the case's tmp directory and is always stopped, even on failure.
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, isAbsolute, join, relative } from 'node:path';
import { performance } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { CoreV1Api, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { pino } from 'pino';
import { PodLogHttp } from '../../collector/sources/pod-logs/pod-log-http.js';
import { DemoGateway } from '../../demo-gateway/demo-gateway.js';
import type { AgentMessage } from '../../proto/index.js';
import {
  killClusterProcesses,
  startCluster,
  stopCluster,
  type ClusterOptions,
} from '../../test/cluster/cluster.js';
import {
  createTestNamespace,
  eventually,
  loadKubeConfig,
  serveLogsFromFile,
} from '../../test/helpers/kube.js';
import { until } from '../../test/helpers/wait.js';
import { median, rate, type BenchCase, type BenchContext, type BenchResult } from '../types.js';

const HOST = '127.0.0.1';
const TOKEN = 'bench-pod-logs-e2e-token-0123456789';
const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

/** Followed containers (one per pod) in the backlog and fixed-rate parts. */
const PODS = 4;
/** Bytes of each line as the API server returns it (`<RFC3339Nano> <message>\n`). */
const LINE_BYTES = 100;
/** The CPU target's delivered rate, all containers together (see the header). */
const TARGET_RATE = 60_000;
/** The CPU target: under half a core. */
const CPU_TARGET_PERCENT = 50;
/** Keeping up: the collector ships at least this share of TARGET_RATE over the window. */
const KEEP_UP_SHARE = 0.95;
/** From the writer's start to the window, and the window, the same for both readers. */
const WARMUP_MS = 2000;
const WINDOW_MS = 6000;
const ROUNDS = 3;
/**
 * After a fixed-rate window, how long the reader may take to get every line written (a reader
 * that cannot keep up drains a backlog first): generous, it bounds a stuck run, not a figure.
 */
const DRAIN_LIMIT_MS = 240_000;
/** Lines already in each container's log for the backlog part. */
const BACKLOG_LINES = 30_000;
/** 40 pods x 5 containers = 200 follow streams, the collector's default cap. */
const STREAM_PODS = 40;
const STREAM_CONTAINERS = 5;
/** Idle time before RSS is read, the same for both collectors. */
const SETTLE_MS = 3000;

const clockTicks = ((): number => {
  try {
    return Number.parseInt(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }), 10) || 100;
  } catch {
    return 100;
  }
})();

/** User + system CPU seconds of a process, from /proc/<pid>/stat. */
function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${String(pid)}/stat`, 'utf8');
  // Fields after the parenthesised command name start with field 3 (state); utime is 14.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const ticks = Number(fields[11]) + Number(fields[12]);
  return ticks / clockTicks;
}

/** Resident set size in MiB from /proc/<pid>/status: VmRSS now, or VmHWM (the peak). */
function rssMiB(pid: number, field: 'VmRSS' | 'VmHWM' = 'VmRSS'): number {
  const status = readFileSync(`/proc/${String(pid)}/status`, 'utf8');
  const kib = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1];
  if (kib === undefined) throw new Error(`no ${field} for pid ${String(pid)}`);
  return Number(kib) / 1024;
}

/** Resets the process's VmHWM to its current RSS, so a later VmHWM is the peak since now. */
function resetPeakRss(pid: number): void {
  writeFileSync(`/proc/${String(pid)}/clear_refs`, '5');
}

/** `2026-01-02T03:04:05.123456789Z`: second + nanosecond, as a runtime writes it. */
function rfc3339Nano(seconds: number, nanos: number): string {
  const iso = new Date(seconds * 1000).toISOString().replace('.000Z', '');
  return `${iso}.${String(nanos).padStart(9, '0')}Z`;
}

/**
 * A CRI log file of `count` uniquely numbered lines, 1 µs apart, ending a minute ago. Every line
 * the API server returns for it (`<timestamp> <message>\n`) is LINE_BYTES long (nanoseconds are
 * never a multiple of 10, so Go's RFC3339Nano keeps all nine digits).
 */
export function criFile(count: number, tag: string): string {
  const startSeconds = Math.floor(Date.now() / 1000) - 60 - Math.ceil(count / 1_000_000);
  const parts: string[] = [];
  for (let i = 0; i < count; i++) {
    const seconds = startSeconds + Math.floor(i / 1_000_000);
    const nanos = (i % 1_000_000) * 1000 + 1;
    const stamp = rfc3339Nano(seconds, nanos);
    const head = `${tag} line ${String(i).padStart(8, '0')} level=info msg="request handled" `;
    const message = head.padEnd(LINE_BYTES - stamp.length - 2, 'x');
    parts.push(`${stamp} stdout F ${message}\n`);
  }
  return parts.join('');
}

interface Collector {
  readonly pid: number;
  readonly ports: Promise<{ health: number; metrics: number }>;
  /** Resolves when the process exits, for whatever reason. */
  readonly exited: Promise<unknown>;
  /** An error that says the collector exited, with its stderr. */
  failure(): Error;
  stop(): Promise<void>;
}

/** Collectors still running, killed if the bench process exits (the run's watchdog). */
const running = new Set<ChildProcess>();

/**
 * `node --import tsx collector/main.ts`, or with KUBEXA_BENCH_COLLECTOR_JS (e.g. the
 * `npm run build` output `dist/js/collector/main.js`) the compiled collector the image runs.
 * KUBEXA_BENCH_COLLECTOR_NODE_ARGS adds node flags, e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof`.
 */
/** An absolute path inside the repository, written relative to it; anything else unchanged. */
function relativeToRoot(arg: string): string {
  if (!isAbsolute(arg)) return arg;
  const inside = relative(root, arg);
  return inside.startsWith('..') ? arg : inside;
}

function collectorEntry(): string[] {
  const compiled = process.env['KUBEXA_BENCH_COLLECTOR_JS'];
  const flags = (process.env['KUBEXA_BENCH_COLLECTOR_NODE_ARGS'] ?? '').split(' ').filter(Boolean);
  return compiled === undefined || compiled === ''
    ? [...flags, '--import', 'tsx', join(root, 'collector', 'main.ts')]
    : [...flags, compiled];
}

function startCollector(configPath: string, kubeconfigPath: string): Collector {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    KUBECONFIG: kubeconfigPath,
    KUBEXA_TENANT_TOKEN: TOKEN,
  };
  delete env['KUBERNETES_SERVICE_HOST'];
  delete env['KUBEXA_AGENT_ID'];
  const child: ChildProcess = spawn(
    process.execPath,
    [...collectorEntry(), `--config=${configPath}`],
    { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const pid = child.pid;
  if (pid === undefined) throw new Error('the collector process did not start');
  running.add(child);
  const stderr: string[] = [];
  child.stderr?.on('data', (chunk: Buffer) => stderr.push(chunk.toString()));
  const exited = once(child, 'exit').finally(() => running.delete(child));
  const failure = (): Error => new Error(`the collector exited: ${stderr.join('').slice(-2000)}`);
  const ports = new Promise<{ health: number; metrics: number }>((resolve, reject) => {
    if (child.stdout) {
      createInterface({ input: child.stdout }).on('line', (raw) => {
        try {
          const line = JSON.parse(raw) as {
            msg?: string;
            ports?: { health: number; metrics: number };
          };
          if (line.msg === 'collector started' && line.ports) resolve(line.ports);
        } catch {
          // Not JSON: ignored.
        }
      });
    }
    void exited.then(() => {
      reject(failure());
    });
  });
  ports.catch(() => undefined);
  return {
    pid,
    ports,
    exited,
    failure,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

function collectorConfig(dir: string, name: string, gatewayPort: number, logs: string[]): string {
  const path = join(dir, `${name}.yaml`);
  writeFileSync(
    path,
    [
      'gateway:',
      `  address: ${HOST}:${String(gatewayPort)}`,
      '  tls: false',
      '  reconnect_initial_delay: 200ms',
      '  reconnect_max_delay: 1s',
      'buffer:',
      `  spill_dir: ${JSON.stringify(join(dir, `${name}-data`))}`,
      'observability:',
      `  health_addr: "${HOST}:0"`,
      `  metrics_addr: "${HOST}:0"`,
      'collect:',
      '  logs:',
      // Checkpoints on, as the chart's default: intents and releases are SQLite commits.
      `    checkpoint_dir: ${JSON.stringify(join(dir, `${name}-data`, 'log-checkpoints'))}`,
      ...logs.map((line) => `    ${line}`),
      '',
    ].join('\n'),
  );
  return path;
}

async function metricValue(port: number, name: string): Promise<number | undefined> {
  const text = await (await fetch(`http://${HOST}:${String(port)}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line === undefined ? undefined : Number(line.slice(name.length + 1));
}

async function createPods(
  kc: KubeConfig,
  namespace: string,
  pods: number,
  containers: number,
): Promise<void> {
  const core = kc.makeApiClient(CoreV1Api);
  const bodies: V1Pod[] = Array.from({ length: pods }, (_, p) => ({
    metadata: { name: `app-${String(p)}`, labels: { app: 'bench' } },
    spec: {
      containers: Array.from({ length: containers }, (_, c) => ({
        name: `c${String(c)}`,
        image: 'registry.invalid/app:1',
      })),
    },
  }));
  await Promise.all(bodies.map((body) => core.createNamespacedPod({ namespace, body })));
  await eventually(
    `${String(pods)} pods running in ${namespace}`,
    async () => {
      const list = await core.listNamespacedPod({ namespace });
      const running = list.items.filter((pod) => pod.status?.phase === 'Running').length;
      return running === pods ? true : undefined;
    },
    { timeoutMs: 60_000, intervalMs: 200 },
  );
  // Running is not yet servable: wait until kwok answers a log request for every container.
  for (const body of bodies) {
    for (const container of body.spec?.containers ?? []) {
      await eventually(
        `the log of ${namespace}/${body.metadata?.name ?? ''}/${container.name}`,
        async () => {
          await core.readNamespacedPodLog({
            namespace,
            name: body.metadata?.name ?? '',
            container: container.name,
            tailLines: 1,
          });
          return true;
        },
        { timeoutMs: 60_000, intervalMs: 200 },
      );
    }
  }
}

/** What every collector run of this case shares. */
interface Harness {
  readonly dir: string;
  readonly kubeconfigPath: string;
}

/**
 * A fresh demo gateway (acks on, in-memory store) for each collector run: a collector re-reading
 * the same containers sends the same message ids, which a gateway that saw them would drop.
 */
async function withGateway<T>(use: (gateway: DemoGateway, port: number) => Promise<T>): Promise<T> {
  const gateway = new DemoGateway(
    // Messages stored and deduplicated as always, but no per-line rows for the Logs view: at
    // these rates that index costs the gateway more CPU than the collector spends on the lines.
    { acceptToken: TOKEN, deliveryAcks: true, indexLogLines: false },
    { logger: pino({ level: 'silent' }) },
  );
  try {
    return await use(gateway, await gateway.listen(HOST, 0));
  } finally {
    await gateway.close();
  }
}

/** CPU seconds of kube-apiserver + kwok, the processes that serve pods/log. */
let servingPids: readonly number[] = [];

function servingCpuSeconds(): number {
  return servingPids.reduce((sum, pid) => sum + cpuSeconds(pid), 0);
}

function readServingPids(options: ClusterOptions): number[] {
  const dir = join(options.workdir, 'clusters', options.name, 'pids');
  return ['kube-apiserver.pid', 'kwok-controller.pid'].map((file) =>
    Number.parseInt(readFileSync(join(dir, file), 'utf8').trim(), 10),
  );
}

/** A reading over one window: lines/s delivered to the reader and CPU shares of one core. */
interface Reading {
  readonly linesPerSecond: number;
  /** The reader's CPU (the bare client, or the collector process). */
  readonly cpuPercent: number;
  /** kube-apiserver + kwok over the same window. */
  readonly clusterCpuPercent: number;
  readonly windowMs: number;
}

/** What the collector's side adds. */
interface CollectorReading extends Reading {
  readonly gatewayCpuPercent: number;
  /** VmHWM over the window (reset at its start). */
  readonly peakRssMiB: number;
  /** Where the lines were over the window, by the collector's own metrics (fixed rate only). */
  readonly pipeline?: Pipeline;
  /** Messages redelivered over the whole run (dropped by the gateway by id). */
  readonly duplicateMessages: number;
}

/**
 * The collector's side of a fixed-rate window: how fast it read lines from the API server (so a
 * shortfall at the gateway is told apart from one in kwok's serving), how many buffer items
 * went to the disk tier, and gateway sessions that ended stalled.
 */
interface Pipeline {
  readonly readPerSecond: number;
  readonly diskItemsAtEnd: number;
  readonly stalledSessions: number;
}

interface PipelineMark {
  readonly at: number;
  readonly linesRead: number;
  readonly diskItems: number;
  readonly stalls: number;
}

async function pipelineMark(metrics: number): Promise<PipelineMark> {
  const text = await (await fetch(`http://${HOST}:${String(metrics)}/metrics`)).text();
  const value = (name: string): number => {
    const line = text.split('\n').find((l) => l.startsWith(`${name} `));
    return line === undefined ? 0 : Number(line.slice(name.length + 1));
  };
  return {
    at: performance.now(),
    linesRead: value('kubexa_collector_log_lines_read_total'),
    diskItems: value('kubexa_collector_buffer_items{tier="disk"}'),
    stalls: value('kubexa_collector_gateway_stalled_sessions_total'),
  };
}

function pipelineBetween(from: PipelineMark, to: PipelineMark): Pipeline {
  return {
    readPerSecond: rate(to.linesRead - from.linesRead, to.at - from.at),
    diskItemsAtEnd: to.diskItems,
    stalledSessions: to.stalls - from.stalls,
  };
}

/** CPU and time at one instant, for a window between two of them. */
interface Mark {
  readonly at: number;
  readonly lines: number;
  readonly cpuSeconds: number;
  readonly clusterCpuSeconds: number;
  readonly benchCpu: NodeJS.CpuUsage;
}

function mark(lines: number, readerCpuSeconds: number): Mark {
  return {
    at: performance.now(),
    lines,
    cpuSeconds: readerCpuSeconds,
    clusterCpuSeconds: servingCpuSeconds(),
    benchCpu: process.cpuUsage(),
  };
}

const benchCpuSeconds = (): number => {
  const used = process.cpuUsage();
  return (used.user + used.system) / 1e6;
};

function between(from: Mark, to: Mark): Reading & { readonly benchCpuPercent: number } {
  const ms = to.at - from.at;
  const share = (seconds: number): number => ((seconds * 1000) / ms) * 100;
  const bench =
    (to.benchCpu.user - from.benchCpu.user + to.benchCpu.system - from.benchCpu.system) / 1e6;
  return {
    linesPerSecond: rate(to.lines - from.lines, ms),
    cpuPercent: share(to.cpuSeconds - from.cpuSeconds),
    clusterCpuPercent: share(to.clusterCpuSeconds - from.clusterCpuSeconds),
    windowMs: ms,
    benchCpuPercent: share(bench),
  };
}

/** The rate-limited writer (bench/log-writer.ts) in its own process, once it writes. */
async function startWriter(
  file: string,
  linesPerSecond: number,
  tag: string,
): Promise<{ stop(): Promise<number> }> {
  const child = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      join(root, 'bench', 'log-writer.ts'),
      file,
      String(linesPerSecond),
      String(LINE_BYTES),
      tag,
    ],
    { cwd: root, stdio: ['ignore', 'pipe', 'inherit'] },
  );
  running.add(child);
  // 'close', not 'exit': the last stdout line has been read by then.
  const exited = once(child, 'close').finally(() => running.delete(child));
  let written: number | undefined;
  const started = new Promise<void>((resolve, reject) => {
    createInterface({ input: child.stdout }).on('line', (line) => {
      const said = JSON.parse(line) as { started?: boolean; written?: number };
      if (said.started === true) resolve();
      if (said.written !== undefined) written = said.written;
    });
    void exited.then(() => {
      reject(new Error('the log writer exited before it started'));
    });
  });
  await started;
  return {
    async stop() {
      child.kill('SIGTERM');
      await exited;
      if (written === undefined) throw new Error('the log writer did not say what it wrote');
      return written;
    },
  };
}

/**
 * Follow reads of every container of `namespace` through PodLogHttp by a client that only
 * counts newlines. `first` is when the first chunk arrived.
 */
function bareFollow(kc: KubeConfig, namespace: string) {
  const reader = new PodLogHttp(kc);
  const stop = new AbortController();
  let lines = 0;
  let firstAt: number | undefined;
  let firstLines = 0;
  let lastAt = 0;
  const reads = Promise.all(
    Array.from({ length: PODS }, (_, p) =>
      reader.read(
        {
          namespace,
          pod: `app-${String(p)}`,
          container: 'c0',
          follow: true,
        },
        stop.signal,
        (chunk) => {
          let n = 0;
          for (let i = chunk.indexOf(10); i !== -1; i = chunk.indexOf(10, i + 1)) n++;
          lines += n;
          lastAt = performance.now();
          if (firstAt === undefined) {
            firstAt = lastAt;
            firstLines = n;
          }
        },
      ),
    ),
  );
  reads.catch(() => undefined);
  return {
    lines: () => lines,
    first: () => (firstAt === undefined ? undefined : { at: firstAt, lines: firstLines }),
    lastAt: () => lastAt,
    async close() {
      stop.abort();
      await reads.catch(() => undefined);
      reader.close();
    },
  };
}

/** The bare reader through a backlog of PODS x BACKLOG_LINES lines: first chunk to last line. */
async function bareBacklog(kc: KubeConfig, namespace: string): Promise<Reading> {
  const total = PODS * BACKLOG_LINES;
  const reads = bareFollow(kc, namespace);
  let from: Mark | undefined;
  try {
    await until(() => reads.first() !== undefined, 'the first backlog chunk', {
      timeoutMs: 30_000,
      intervalMs: 20,
    });
    const first = reads.first();
    from = { ...mark(first?.lines ?? 0, benchCpuSeconds()), at: first?.at ?? 0 };
    await until(() => reads.lines() >= total, `${String(total)} backlog lines`, {
      timeoutMs: 60_000,
      intervalMs: 20,
    });
    const to = { ...mark(reads.lines(), benchCpuSeconds()), at: reads.lastAt() };
    if (reads.lines() !== total) throw new Error(`bare reader got ${String(reads.lines())} lines`);
    return between(from, to);
  } finally {
    await reads.close();
  }
}

/** The bare reader while the writer delivers TARGET_RATE: the window's rate and CPU. */
/** Where a fixed-rate run writes and reads: a namespace whose pods all serve `file`. */
interface RateLog {
  readonly namespace: string;
  readonly file: string;
}

async function bareAtRate(
  kc: KubeConfig,
  { namespace, file }: RateLog,
  tag: string,
  measure: boolean,
) {
  // Emptied while no one reads it: each round's reads start at its first line.
  writeFileSync(file, '');
  const reads = bareFollow(kc, namespace);
  try {
    await sleep(1000); // the follow requests are open before the first line is written
    const writer = await startWriter(file, TARGET_RATE / PODS, tag);
    await sleep(WARMUP_MS);
    const from = mark(reads.lines(), benchCpuSeconds());
    await sleep(measure ? WINDOW_MS : 1000);
    const to = mark(reads.lines(), benchCpuSeconds());
    const written = (await writer.stop()) * PODS;
    await until(() => reads.lines() >= written, `${String(written)} lines at the bare reader`, {
      timeoutMs: DRAIN_LIMIT_MS,
      intervalMs: 20,
    });
    if (reads.lines() !== written)
      throw new Error(`bare reader got ${String(reads.lines())} of ${String(written)} lines`);
    return between(from, to);
  } finally {
    await reads.close();
  }
}

/** A collector and a demo gateway that count the log entries stored for one namespace. */
/** Counters the gateway keeps for one namespace's log entries. */
interface Counted {
  entries(): number;
  messages(): number;
  first(): { at: number; entries: number } | undefined;
  lastAt(): number;
  /**
   * Messages the gateway had already stored (it drops them by id): a redelivery, after a
   * session ended with items awaiting their ack. Counted, not a failure: every line must still
   * be stored once.
   */
  duplicates(): number;
}

async function withCountingCollector<T>(
  harness: Harness,
  { name, namespace, logs }: { name: string; namespace: string; logs: string[] },
  use: (counted: Counted, collector: Collector) => Promise<T>,
): Promise<T> {
  return withGateway(async (gateway, gatewayPort) => {
    let entries = 0;
    let messages = 0;
    let duplicates = 0;
    let first: { at: number; entries: number } | undefined;
    let lastAt = 0;
    const onMessage = (message: AgentMessage, isNew: boolean): void => {
      if (message.payload?.$case !== 'logs') return;
      const batch = message.payload.value.entries;
      if (batch[0]?.namespace !== namespace) return;
      if (!isNew) {
        duplicates++;
        return;
      }
      entries += batch.length;
      messages++;
      lastAt = performance.now();
      first ??= { at: lastAt, entries: batch.length };
    };
    gateway.events.on('message', onMessage);
    const collector = startCollector(
      collectorConfig(harness.dir, name, gatewayPort, [
        ...logs,
        'rules:',
        `  - namespace: ${namespace}`,
      ]),
      harness.kubeconfigPath,
    );
    try {
      const result = await Promise.race([
        use(
          {
            entries: () => entries,
            messages: () => messages,
            first: () => first,
            lastAt: () => lastAt,
            duplicates: () => duplicates,
          },
          collector,
        ),
        collector.exited.then(() => Promise.reject(collector.failure())),
      ]);
      return result;
    } finally {
      gateway.events.off('message', onMessage);
      await collector.stop();
    }
  });
}

/**
 * A fresh collector follows the emptied file's containers; once every stream is open the writer
 * starts; the window and the drain are those of the bare reader.
 */
async function collectorAtRate(
  harness: Harness,
  { namespace, file }: RateLog,
  tag: string,
  measure: boolean,
): Promise<CollectorReading> {
  writeFileSync(file, '');
  return withCountingCollector(
    harness,
    { name: `rate-${tag}`, namespace, logs: [] },
    async (counted, collector) => {
      const { metrics } = await collector.ports;
      await eventually(
        'the collector follows every container',
        async () =>
          (await connected(metrics)) && (await activeStreams(metrics)) === PODS ? true : undefined,
        { timeoutMs: 120_000, intervalMs: 200 },
      );
      const writer = await startWriter(file, TARGET_RATE / PODS, tag);
      await sleep(WARMUP_MS);
      resetPeakRss(collector.pid);
      const pipelineFrom = await pipelineMark(metrics);
      const from = mark(counted.entries(), cpuSeconds(collector.pid));
      await sleep(measure ? WINDOW_MS : 1000);
      const to = mark(counted.entries(), cpuSeconds(collector.pid));
      const peakRssMiB = rssMiB(collector.pid, 'VmHWM');
      // After the window's marks: a collector too busy to answer its /metrics cannot stretch it.
      const pipeline = pipelineBetween(pipelineFrom, await pipelineMark(metrics));
      const written = (await writer.stop()) * PODS;
      await until(() => counted.entries() >= written, `${String(written)} lines at the gateway`, {
        timeoutMs: DRAIN_LIMIT_MS,
        intervalMs: 20,
      });
      if (counted.entries() !== written)
        throw new Error(`the gateway got ${String(counted.entries())} of ${String(written)} lines`);
      const reading = between(from, to);
      return {
        ...reading,
        gatewayCpuPercent: reading.benchCpuPercent,
        peakRssMiB,
        pipeline,
        duplicateMessages: counted.duplicates(),
      };
    },
  );
}

/** A fresh collector ships the backlog: first stored message to the last, VmHWM over it. */
async function collectorBacklog(
  harness: Harness,
  namespace: string,
  run: string,
): Promise<CollectorReading> {
  const total = PODS * BACKLOG_LINES;
  return withCountingCollector(
    harness,
    { name: `backlog-${run}`, namespace, logs: [`tail_lines: ${String(BACKLOG_LINES)}`] },
    async (counted, collector) => {
      await until(() => counted.first() !== undefined, 'the first log message at the gateway', {
        timeoutMs: 120_000,
        intervalMs: 20,
      });
      resetPeakRss(collector.pid);
      const first = counted.first();
      const from = { ...mark(first?.entries ?? 0, cpuSeconds(collector.pid)), at: first?.at ?? 0 };
      await until(() => counted.entries() >= total, `all ${String(total)} lines at the gateway`, {
        timeoutMs: 60_000,
        intervalMs: 20,
      });
      const to = { ...mark(counted.entries(), cpuSeconds(collector.pid)), at: counted.lastAt() };
      const peakRssMiB = rssMiB(collector.pid, 'VmHWM');
      if (counted.entries() !== total)
        throw new Error(`the gateway got ${String(counted.entries())} lines`);
      const reading = between(from, to);
      return {
        ...reading,
        gatewayCpuPercent: reading.benchCpuPercent,
        peakRssMiB,
        duplicateMessages: counted.duplicates(),
      };
    },
  );
}

const fmtRate = (n: number): string => Math.round(n).toLocaleString('en-US');
const pct = (n: number): string => `${n.toFixed(0)}% core`;
const usPerLine = (r: Reading): number => (r.cpuPercent * 1e4) / Math.max(r.linesPerSecond, 1e-9);

function describe(label: string, r: Reading): string {
  return (
    `${label} ${fmtRate(r.linesPerSecond)} lines/s over ${String(Math.round(r.windowMs))} ms, ` +
    `${pct(r.cpuPercent)} (${usPerLine(r).toFixed(1)} µs/line), apiserver+kwok ${pct(r.clusterCpuPercent)}`
  );
}

function describeCollector(r: CollectorReading): string {
  const pipeline =
    r.pipeline === undefined
      ? ''
      : ` (it read ${fmtRate(r.pipeline.readPerSecond)} lines/s from the API server; ` +
        `${String(r.pipeline.diskItemsAtEnd)} buffer items on disk at the end, ` +
        `${String(r.pipeline.stalledSessions)} gateway sessions ended stalled)`;
  const redelivered =
    r.duplicateMessages > 0 ? `, ${String(r.duplicateMessages)} messages redelivered` : '';
  return `${describe('collector', r)}${pipeline}${redelivered}, demo gateway ${pct(r.gatewayCpuPercent)}, peak RSS ${r.peakRssMiB.toFixed(0)} MiB`;
}

/** RSS of a collector after it reached `ready` and then idled for SETTLE_MS. */
async function collectorRss(
  { dir, kubeconfigPath }: Harness,
  name: string,
  logs: string[],
  ready: (metricsPort: number) => Promise<boolean>,
): Promise<number> {
  return withGateway(async (_gateway, gatewayPort) => {
    const collector = startCollector(collectorConfig(dir, name, gatewayPort, logs), kubeconfigPath);
    try {
      const { metrics } = await collector.ports;
      await eventually(
        `${name}: ready to measure`,
        async () => ((await ready(metrics)) ? true : undefined),
        { timeoutMs: 40_000, intervalMs: 200 },
      );
      await sleep(SETTLE_MS);
      if (!(await ready(metrics))) throw new Error(`${name}: no longer ready after settling`);
      return rssMiB(collector.pid);
    } finally {
      await collector.stop();
    }
  });
}

const connected = async (metrics: number): Promise<boolean> =>
  (await metricValue(metrics, 'kubexa_collector_gateway_connection_state{state="connected"}')) ===
  1;

const activeStreams = (metrics: number): Promise<number | undefined> =>
  metricValue(metrics, 'kubexa_collector_log_active_streams');

const INOTIFY_INSTANCES = '/proc/sys/fs/inotify/max_user_instances';

/**
 * kwok opens one inotify instance per followed log (fsnotify, in the kubelet's log reader), and
 * the kernel's per-user limit (128 by default) is shared by every process of the user on the
 * machine: 200 followed streams cannot all open, and the collector loops on reconnects. Raised
 * here (as root) to what the 200-stream part needs; otherwise the run says why it cannot go on.
 */
export function ensureInotifyInstances(needed: number, log: (line: string) => void): void {
  const current = Number.parseInt(readFileSync(INOTIFY_INSTANCES, 'utf8').trim(), 10);
  if (current >= needed) return;
  try {
    writeFileSync(INOTIFY_INSTANCES, String(needed));
  } catch (err: unknown) {
    throw new Error(
      `fs.inotify.max_user_instances is ${String(current)}, and ${String(needed)} are needed ` +
        `(kwok opens one per followed log); raise it (sysctl -w fs.inotify.max_user_instances=${String(needed)})`,
      { cause: err },
    );
  }
  log(`raised fs.inotify.max_user_instances from ${String(current)} to ${String(needed)}`);
}

/** A namespace of PODS one-container pods whose logs are `file` (kwok follows it). */
export async function logNamespace(
  kc: KubeConfig,
  prefix: string,
  file: string,
  { pods, containers } = { pods: PODS, containers: 1 },
): Promise<string> {
  const namespace = await createTestNamespace(kc, prefix);
  await serveLogsFromFile(kc, { namespace: namespace.name, logsFile: file });
  await createPods(kc, namespace.name, pods, containers);
  return namespace.name;
}

export const podLogsE2eBench: BenchCase = {
  name: 'pod-logs-e2e',
  async run({ dir, log }: BenchContext): Promise<BenchResult[]> {
    const options: ClusterOptions = {
      name: `kubexa-bench-${String(process.pid)}`,
      workdir: join(dir, 'cluster'),
      env: process.env,
    };
    const onExit = (): void => {
      for (const child of running) child.kill('SIGKILL');
      killClusterProcesses(options.workdir, options.name);
    };
    process.once('exit', onExit);
    try {
      const started = performance.now();
      const cluster = await startCluster(options);
      const kc = loadKubeConfig(cluster.kubeconfigPath);
      servingPids = readServingPids(options);
      const harness: Harness = { dir, kubeconfigPath: cluster.kubeconfigPath };

      const backlogFile = join(dir, 'backlog.log');
      writeFileSync(backlogFile, criFile(BACKLOG_LINES, 'backlog'));
      const backlog = await logNamespace(kc, 'bench-backlog', backlogFile);
      const bareFile = join(dir, 'rate-bare.log');
      writeFileSync(bareFile, '');
      const bareLog: RateLog = {
        namespace: await logNamespace(kc, 'bench-rate-bare', bareFile),
        file: bareFile,
      };
      const collectorFile = join(dir, 'rate-collector.log');
      writeFileSync(collectorFile, '');
      const collectorNamespace = await logNamespace(kc, 'bench-rate-collector', collectorFile);
      const streamsFile = join(dir, 'streams.log');
      writeFileSync(streamsFile, criFile(10, 'idle'));
      const streams = await logNamespace(kc, 'bench-streams', streamsFile, {
        pods: STREAM_PODS,
        containers: STREAM_CONTAINERS,
      });
      // Paths relative to the repository: the line lands in bench/results, which is committed.
      log(
        `collector: node ${collectorEntry()
          .map((arg) => relativeToRoot(arg))
          .join(' ')}`,
      );
      log(
        `cluster + ${String(3 * PODS + STREAM_PODS)} pods ready in ${String(Math.round(performance.now() - started))} ms`,
      );

      // Fixed rate: the bare reader and a fresh collector take turns, each on its own file
      // (emptied first) and namespace, with its own writer once every stream is open.
      const collectorLog: RateLog = { namespace: collectorNamespace, file: collectorFile };
      const bareRate: Reading[] = [];
      const collectorRate: CollectorReading[] = [];
      await bareAtRate(kc, bareLog, 'warmup', false);
      await collectorAtRate(harness, collectorLog, 'warmup', false);
      for (let round = 1; round <= ROUNDS; round++) {
        const b = await bareAtRate(kc, bareLog, `r${String(round)}`, true);
        const c = await collectorAtRate(harness, collectorLog, `r${String(round)}`, true);
        bareRate.push(b);
        collectorRate.push(c);
        log(
          `at ${fmtRate(TARGET_RATE)} lines/s, round ${String(round)}: ${describe('bare reader', b)} | ${describeCollector(c)}`,
        );
      }

      // Backlog: a fresh collector per round (it reads each log from its start).
      await bareBacklog(kc, backlog);
      await collectorBacklog(harness, backlog, 'warmup');
      const bareBacklogs: Reading[] = [];
      const collectorBacklogs: CollectorReading[] = [];
      for (let round = 1; round <= ROUNDS; round++) {
        const b = await bareBacklog(kc, backlog);
        const c = await collectorBacklog(harness, backlog, String(round));
        bareBacklogs.push(b);
        collectorBacklogs.push(c);
        log(
          `backlog of ${fmtRate(PODS * BACKLOG_LINES)} lines, round ${String(round)}: ${describe('bare reader', b)} | ${describeCollector(c)}`,
        );
      }

      const idleRss = await collectorRss(harness, 'logs-off', ['enabled: false'], connected);
      // 200 streams, plus what the rest of the machine holds.
      ensureInotifyInstances(1024, log);
      const streamsRss = await collectorRss(
        harness,
        'streams-200',
        ['rules:', `  - namespace: ${streams}`],
        async (metrics) =>
          (await connected(metrics)) &&
          (await activeStreams(metrics)) === STREAM_PODS * STREAM_CONTAINERS,
      );

      const target = fmtRate(TARGET_RATE);
      return [
        {
          name: `collector CPU at a steady ${target} lines/s`,
          unit: '% core',
          itemsPerSecond: median(collectorRate.map((r) => r.cpuPercent)),
          baselineName: 'bare follow reader, same rate',
          baselineItemsPerSecond: median(bareRate.map((r) => r.cpuPercent)),
          targetAtMost: CPU_TARGET_PERCENT,
        },
        {
          name: `lines/s shipped while ${target} lines/s are written`,
          unit: 'lines/s',
          itemsPerSecond: median(collectorRate.map((r) => r.linesPerSecond)),
          baselineName: 'bare follow reader',
          baselineItemsPerSecond: median(bareRate.map((r) => r.linesPerSecond)),
          targetItemsPerSecond: KEEP_UP_SHARE * TARGET_RATE,
        },
        {
          // Where the shortfall is: read from the API server but not shipped is the collector's.
          name: `lines/s the collector read from the API server while ${target} lines/s are written`,
          unit: 'lines/s',
          itemsPerSecond: median(collectorRate.map((r) => r.pipeline?.readPerSecond ?? 0)),
          baselineName: 'bare follow reader',
          baselineItemsPerSecond: median(bareRate.map((r) => r.linesPerSecond)),
        },
        {
          name: `collector CPU per line at ${target} lines/s`,
          unit: 'µs',
          itemsPerSecond: median(collectorRate.map(usPerLine)),
          baselineName: 'bare follow reader',
          baselineItemsPerSecond: median(bareRate.map(usPerLine)),
        },
        {
          name: `collector peak RSS at ${target} lines/s`,
          unit: 'MiB',
          itemsPerSecond: median(collectorRate.map((r) => r.peakRssMiB)),
          baselineName: 'idle, logs disabled',
          baselineItemsPerSecond: idleRss,
        },
        {
          name: `backlog of ${fmtRate(PODS * BACKLOG_LINES)} lines: file -> API server -> collector -> gateway`,
          unit: 'lines/s',
          itemsPerSecond: median(collectorBacklogs.map((r) => r.linesPerSecond)),
          baselineName: 'bare follow reader, same backlog',
          baselineItemsPerSecond: median(bareBacklogs.map((r) => r.linesPerSecond)),
        },
        {
          name: 'collector CPU while shipping the backlog',
          unit: '% core',
          itemsPerSecond: median(collectorBacklogs.map((r) => r.cpuPercent)),
          baselineName: 'bare follow reader',
          baselineItemsPerSecond: median(bareBacklogs.map((r) => r.cpuPercent)),
        },
        {
          name: 'collector peak RSS over the backlog burst',
          unit: 'MiB',
          itemsPerSecond: median(collectorBacklogs.map((r) => r.peakRssMiB)),
          baselineName: 'idle, logs disabled',
          baselineItemsPerSecond: idleRss,
        },
        {
          name: 'collector RSS, 200 open log streams, idle',
          unit: 'MiB',
          itemsPerSecond: streamsRss,
          baselineName: 'idle, logs disabled',
          baselineItemsPerSecond: idleRss,
        },
      ];
    } finally {
      await stopCluster(options);
      process.off('exit', onExit);
    }
  },
};
