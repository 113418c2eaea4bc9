// Keystroke round trip of a pod console on the real node: one byte typed at the demo gateway goes
// gateway -> collector process -> executor process -> API server -> kubelet -> the container's
// TTY, and its echo comes back the same way. The baseline, measured in the same run against the
// same pod, is a bare `pods/exec` WebSocket from a plain `ws` client in this process (the
// cluster admin's credentials, the same command, the same TTY): everything the agent adds is the
// difference.
//
// The process on the TTY is `stty raw -echo; exec cat`: each byte in is read at once and written
// back by the process (as a shell's line editor does), so one keystroke is exactly one byte out.
// A keystroke is timed from the write on the gateway's call (or the bare socket) to the arrival
// of its echo; the next one is typed GAP_MS later. Agent and bare take turns in ROUNDS rounds of
// KEYS keystrokes each, after an unmeasured warm-up of each.
//
// Two conditions, each measured the same way for both paths:
// - idle: nothing else runs through the agent;
// - log load: the collector follows LOAD_PODS kwok containers whose log file a rate-limited
//   writer process (bench/log-writer.ts) appends to at LOAD_RATE lines/s in total (4 x 15,000
//   lines/s of 100 bytes: the highest rate this test cluster delivers, see pod-logs-e2e), and
//   ships them to the gateway; the rate that reached the gateway is printed with the figures.
//
// THE TARGET (issue 14, fixed here before measuring; a miss is reported as a miss): the p99 the
// agent adds, p99(agent path) - p99(bare path) in the same condition, is under 50 ms, idle and
// under log load. The demo gateway runs in this process (it is the measured path's first hop),
// like the bare client, so both paths are timed on one event loop; the collector and the executor
// are their own processes, as in the agent's Pod. Under load the gateway receives (decodes),
// deduplicates and acks every log batch the collector ships, with delivery acks, but does not
// store them (`storeLogBatches: false`): storing (re-encoding each batch, describing it, inserting
// it into SQLite) was 43 % of this process's busy time under 60,000 lines/s in a CPU profile
// (2026-12-05; this process at 30 % of a core with it, 15-19 % without, its event loop delay p99
// 31 ms with it, 21-24 ms without, at load 1-3), and it held the loop the keystrokes are timed on:
// a cost of the stand-in platform, not of the agent. The gateway is not moved to a process of
// its own: the agent's keystrokes would still be timed on its loop, the bare client's on a quiet
// one, which would charge the gateway's decoding to the agent. On 2 shared cores the API server,
// kwok, the kubelet, containerd, the writer and this process compete with the agent for CPU.
//
// The cluster (with its real node) lives in the case's tmp directory and is always stopped.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { closeSync, existsSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { pino } from 'pino';
import WebSocket from 'ws';
import type { DemoConsole } from '../../demo-gateway/console-hub.js';
import { DemoGateway } from '../../demo-gateway/demo-gateway.js';
import { startDemoExecutor } from '../../scripts/demo-executor.js';
import {
  clusterVersions,
  killClusterProcesses,
  startCluster,
  stopCluster,
  type ClusterOptions,
} from '../../test/cluster/cluster.js';
import { REAL_NODE_LABEL, REAL_NODE_TAINT } from '../../test/cluster/node.js';
import {
  createTestNamespace,
  eventually,
  loadKubeConfig,
  serveLogsFromFile,
} from '../../test/helpers/kube.js';
import type { BenchCase, BenchContext, BenchResult } from '../types.js';

const HOST = '127.0.0.1';
const TOKEN = 'bench-console-round-trip-token-0123';
const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

/** The fixed target: p99 added by the agent, in ms. */
const ADDED_P99_TARGET_MS = 50;
const ROUNDS = 3;
const KEYS = 150;
const WARMUP_KEYS = 40;
const GAP_MS = 5;
/**
 * A keystroke whose echo has not come back after this long stalls its path: it counts as a
 * sample of this value (so the p99 shows it as a miss) and that path types no more in that
 * condition; the other path is still measured.
 */
const KEY_TIMEOUT_MS = 30_000;
const LOAD_PODS = 4;
/** Lines per second per container; the file is shared, so the cluster delivers 4x this. */
const LOAD_RATE_PER_POD = 15_000;
const LINE_BYTES = 100;
/** From the writer's start to the first measured keystroke: the collector reaches its rate. */
const LOAD_WARMUP_MS = 3000;
const TTY_COMMAND = ['sh', '-c', 'stty raw -echo; exec cat'];

const running = new Set<ChildProcess>();

const clockTicks = ((): number => {
  try {
    return Number.parseInt(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }), 10) || 100;
  } catch {
    return 100;
  }
})();

/** User + system CPU seconds of a process, from /proc/<pid>/stat. */
function cpuSeconds(pid: number | undefined): number {
  if (pid === undefined) return 0;
  try {
    const stat = readFileSync(`/proc/${String(pid)}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / clockTicks;
  } catch {
    return 0;
  }
}

/** p-th percentile (nearest rank) of the samples, in their unit. */
export function percentile(samples: readonly number[], p: number): number {
  if (samples.length === 0) return Number.NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1] ?? Number.NaN;
}

/** One end a keystroke is typed into and its echo read from. */
interface Typist {
  /** Types one byte; resolves when its echo came back. */
  key(byte: number): Promise<void>;
  close(): void;
}

/** Waits for `count` more echoed bytes than `base`, counted by `received`. */
function echoWaiter(path: string) {
  let received = 0;
  let wanted = 0;
  let wake: (() => void) | undefined;
  return {
    add(bytes: number) {
      received += bytes;
      if (received >= wanted) wake?.();
    },
    async next(): Promise<void> {
      wanted += 1;
      if (received >= wanted) return;
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => {
          reject(
            new Error(
              `${path}: no echo within ${String(KEY_TIMEOUT_MS)} ms (keystroke ${String(wanted)}, ${String(received)} echoed)`,
            ),
          );
        }, KEY_TIMEOUT_MS);
        wake = () => {
          clearTimeout(timer);
          wake = undefined;
          resolve();
        };
      });
    },
  };
}

/** The agent path: a console the demo gateway opened through the collector and the executor. */
function agentTypist(console: DemoConsole): Typist {
  const echo = echoWaiter('agent path');
  console.on('output', (data) => {
    echo.add(data.length);
  });
  return {
    async key(byte) {
      const echoed = echo.next();
      console.stdin(Buffer.from([byte]));
      await echoed;
    },
    close() {
      console.close('bench done');
    },
  };
}

/** The baseline: pods/exec over WebSocket from a plain `ws` client, channel protocol by hand. */
async function bareTypist(kc: KubeConfig, namespace: string, pod: string): Promise<Typist> {
  const server = kc.getCurrentCluster()?.server ?? '';
  const query = new URLSearchParams();
  for (const arg of TTY_COMMAND) query.append('command', arg);
  for (const [key, value] of Object.entries({ stdin: 'true', stdout: 'true', tty: 'true' })) {
    query.set(key, value);
  }
  const url = `${server.replace(/^http/, 'ws')}/api/v1/namespaces/${namespace}/pods/${pod}/exec?${query.toString()}`;
  const options: WebSocket.ClientOptions = { perMessageDeflate: false };
  await kc.applyToHTTPSOptions(options);
  const socket = new WebSocket(url, ['v5.channel.k8s.io', 'v4.channel.k8s.io'], options);
  await once(socket, 'open');
  const echo = echoWaiter('bare pods/exec');
  socket.on('message', (data: Buffer) => {
    // Channel 1 is stdout (a TTY merges stderr into it).
    if (data[0] === 1) echo.add(data.length - 1);
  });
  return {
    async key(byte) {
      const echoed = echo.next();
      socket.send(Buffer.from([0, byte]));
      await echoed;
    },
    close() {
      socket.close();
    },
  };
}

class Stalled extends Error {}

/** Round-trip times (ms) of `count` keystrokes, GAP_MS apart; Stalled (with them) on a stall. */
async function type(typist: Typist, count: number, times: number[] = []): Promise<number[]> {
  for (let i = 0; i < count; i++) {
    const byte = 97 + (i % 26);
    const start = performance.now();
    try {
      await typist.key(byte);
    } catch (err: unknown) {
      times.push(KEY_TIMEOUT_MS);
      throw new Stalled(err instanceof Error ? err.message : String(err));
    }
    times.push(performance.now() - start);
    await sleep(GAP_MS);
  }
  return times;
}

/** The rate-limited writer (bench/log-writer.ts) in its own process, once it writes. */
async function startWriter(file: string): Promise<{ stop(): Promise<void> }> {
  const child = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      join(root, 'bench', 'log-writer.ts'),
      file,
      String(LOAD_RATE_PER_POD),
      String(LINE_BYTES),
      'console-load',
    ],
    { cwd: root, stdio: ['ignore', 'pipe', 'inherit'] },
  );
  running.add(child);
  const exited = once(child, 'close').finally(() => running.delete(child));
  await new Promise<void>((resolve, reject) => {
    createInterface({ input: child.stdout }).on('line', (line) => {
      if ((JSON.parse(line) as { started?: boolean }).started === true) resolve();
    });
    void exited.then(() => {
      reject(new Error('the log writer exited before it started'));
    });
  });
  return {
    async stop() {
      child.kill('SIGTERM');
      await exited;
    },
  };
}

async function realNodePod(kc: KubeConfig, namespace: string): Promise<string> {
  const core = kc.makeApiClient(CoreV1Api);
  const name = 'console-bench';
  await core.createNamespacedPod({
    namespace,
    body: {
      metadata: { name },
      spec: {
        nodeSelector: { [REAL_NODE_LABEL]: 'true' },
        tolerations: [{ key: REAL_NODE_TAINT, operator: 'Exists', effect: 'NoSchedule' }],
        terminationGracePeriodSeconds: 1,
        containers: [
          {
            name: 'main',
            image: clusterVersions()['BUSYBOX_IMAGE'] ?? '',
            imagePullPolicy: 'Never',
            command: ['sleep', '3600'],
          },
        ],
      },
    },
  });
  await eventually(
    'the console pod running on the real node',
    async () => {
      const pod = await core.readNamespacedPod({ name, namespace });
      return pod.status?.phase === 'Running' ? true : undefined;
    },
    { timeoutMs: 120_000, intervalMs: 500 },
  );
  return name;
}

/** kwok pods whose logs come from `file` (a writer appends to it under load). */
async function loadPods(kc: KubeConfig, file: string): Promise<string> {
  const namespace = (await createTestNamespace(kc, 'bench-console-load')).name;
  await serveLogsFromFile(kc, { namespace, logsFile: file });
  const core = kc.makeApiClient(CoreV1Api);
  for (let p = 0; p < LOAD_PODS; p++) {
    await core.createNamespacedPod({
      namespace,
      body: {
        metadata: { name: `load-${String(p)}` },
        spec: { containers: [{ name: 'app', image: 'registry.invalid/app:1' }] },
      },
    });
  }
  await eventually(
    'the load pods running',
    async () => {
      const list = await core.listNamespacedPod({ namespace });
      const up = list.items.filter((pod) => pod.status?.phase === 'Running').length;
      return up === LOAD_PODS ? true : undefined;
    },
    { timeoutMs: 60_000, intervalMs: 200 },
  );
  return namespace;
}

function collectorConfig(dir: string, gatewayPort: number, loadNamespace: string): string {
  const path = join(dir, 'collector.yaml');
  writeFileSync(
    path,
    [
      'gateway:',
      `  address: ${HOST}:${String(gatewayPort)}`,
      '  tls: false',
      '  reconnect_initial_delay: 200ms',
      '  reconnect_max_delay: 1s',
      'buffer:',
      `  spill_dir: ${JSON.stringify(join(dir, 'collector-data'))}`,
      'observability:',
      `  health_addr: "${HOST}:0"`,
      `  metrics_addr: "${HOST}:0"`,
      'collect:',
      '  logs:',
      '    rules:',
      '      - id: load',
      `        namespace: ${loadNamespace}`,
      '',
    ].join('\n'),
  );
  return path;
}

/**
 * `node --import tsx collector/main.ts`, or with KUBEXA_BENCH_COLLECTOR_JS (e.g. `npm run
 * bundle`'s `dist/bundle/collector.js`, what the image runs) that file.
 * KUBEXA_BENCH_COLLECTOR_NODE_ARGS adds node flags, e.g. `--trace-gc --max-semi-space-size=8`.
 */
function collectorEntry(): string[] {
  const compiled = process.env['KUBEXA_BENCH_COLLECTOR_JS'];
  const flags = (process.env['KUBEXA_BENCH_COLLECTOR_NODE_ARGS'] ?? '').split(' ').filter(Boolean);
  return compiled === undefined || compiled === ''
    ? [...flags, '--import', 'tsx', join(root, 'collector', 'main.ts')]
    : [...flags, compiled];
}

function startCollector(configPath: string, kubeconfigPath: string, socketPath: string) {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    KUBECONFIG: kubeconfigPath,
    KUBEXA_TENANT_TOKEN: TOKEN,
    KUBEXA_EXECUTOR_SOCKET: socketPath,
  };
  delete env['KUBERNETES_SERVICE_HOST'];
  // KUBEXA_BENCH_COLLECTOR_STDOUT keeps the collector's stdout (its log, and what node flags
  // such as --trace-gc print) in that file.
  const stdoutPath = process.env['KUBEXA_BENCH_COLLECTOR_STDOUT'];
  const stdout =
    stdoutPath === undefined || stdoutPath === '' ? 'ignore' : openSync(stdoutPath, 'w');
  const child = spawn(process.execPath, [...collectorEntry(), `--config=${configPath}`], {
    cwd: root,
    env,
    stdio: ['ignore', stdout, 'inherit'],
  });
  if (typeof stdout === 'number') closeSync(stdout);
  running.add(child);
  void once(child, 'exit').finally(() => running.delete(child));
  return child;
}

/** Opens a console on the TTY command; resolves once open, with the time it took. */
async function openConsole(
  gateway: DemoGateway,
  agentSession: string,
  namespace: string,
  pod: string,
): Promise<{ console: DemoConsole; ms: number }> {
  const started = performance.now();
  const console = gateway.consoles.open(agentSession, {
    namespace,
    pod,
    command: TTY_COMMAND,
    tty: true,
    cols: 80,
    rows: 24,
  });
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      reject(new Error(`the console not open after 30 s (${console.state})`));
    }, 30_000);
    const check = (): void => {
      if (console.state === 'opening') return;
      clearTimeout(timer);
      console.off('change', check);
      if (console.state === 'open') resolve();
      else reject(new Error(`console ${console.state}: ${JSON.stringify(console.refusal)}`));
    };
    console.on('change', check);
    check();
  });
  return { console, ms: performance.now() - started };
}

interface Condition {
  readonly agent: number[];
  readonly bare: number[];
  /** Why a path stopped typing in this condition (its echo stalled). */
  readonly stalls: string[];
}

async function measure(agent: Typist, bare: Typist): Promise<Condition> {
  const result: Condition = { agent: [], bare: [], stalls: [] };
  const stalled = { agent: false, bare: false };
  for (let round = 0; round < ROUNDS; round++) {
    for (const path of ['agent', 'bare'] as const) {
      if (stalled[path]) continue;
      try {
        await type(path === 'agent' ? agent : bare, KEYS, result[path]);
      } catch (err: unknown) {
        if (!(err instanceof Stalled)) throw err;
        stalled[path] = true;
        result.stalls.push(err.message);
      }
    }
  }
  return result;
}

const ms = (value: number): string => value.toFixed(1);

function rows(label: string, c: Condition, log: (line: string) => void): BenchResult[] {
  const agent = { p50: percentile(c.agent, 50), p99: percentile(c.agent, 99) };
  const bare = { p50: percentile(c.bare, 50), p99: percentile(c.bare, 99) };
  log(
    `${label}: agent p50 ${ms(agent.p50)} p99 ${ms(agent.p99)} max ${ms(Math.max(...c.agent))} ms | ` +
      `bare p50 ${ms(bare.p50)} p99 ${ms(bare.p99)} max ${ms(Math.max(...c.bare))} ms ` +
      `(${String(c.agent.length)} and ${String(c.bare.length)} keystrokes)`,
  );
  for (const stall of c.stalls) log(`${label}: STALLED, ${stall}; that path typed no more here`);
  return [
    {
      name: `keystroke round trip p50, ${label}`,
      itemsPerSecond: agent.p50,
      baselineName: 'bare pods/exec',
      baselineItemsPerSecond: bare.p50,
      unit: 'ms',
    },
    {
      name: `keystroke round trip p99, ${label}`,
      itemsPerSecond: agent.p99,
      baselineName: 'bare pods/exec',
      baselineItemsPerSecond: bare.p99,
      unit: 'ms',
    },
    {
      name: `p99 added by the agent, ${label}`,
      itemsPerSecond: agent.p99 - bare.p99,
      baselineName: 'bare pods/exec p99',
      baselineItemsPerSecond: bare.p99,
      targetAtMost: ADDED_P99_TARGET_MS,
      unit: 'ms',
    },
  ];
}

export const consoleRoundTripBench: BenchCase = {
  name: 'console-round-trip',
  async run({ dir, log }: BenchContext): Promise<BenchResult[]> {
    const options: ClusterOptions = {
      name: `kubexa-bench-console-${String(process.pid)}`,
      workdir: join(dir, 'cluster'),
      env: process.env,
      // A real TTY needs the real node: this case does not fall back to kwok's exec (which has
      // no terminal); a machine without the real node fails here, saying what is missing.
      realNode: true,
    };
    const onExit = (): void => {
      for (const child of running) child.kill('SIGKILL');
      killClusterProcesses(options.workdir, options.name);
    };
    process.once('exit', onExit);
    const gateway = new DemoGateway(
      // Log batches received, deduplicated and acked but not stored (the header says why); every
      // other message (the handshake, heartbeats, audit records) is stored as always.
      { acceptToken: TOKEN, deliveryAcks: true, storeLogBatches: false },
      { logger: pino({ level: 'silent' }) },
    );
    const closers: (() => Promise<void> | void)[] = [];
    try {
      const started = performance.now();
      const cluster = await startCluster(options);
      const kc = loadKubeConfig(cluster.kubeconfigPath);
      const namespace = (await createTestNamespace(kc, 'bench-console')).name;
      const pod = await realNodePod(kc, namespace);
      const loadFile = join(dir, 'load.log');
      writeFileSync(loadFile, '');
      const loadNamespace = await loadPods(kc, loadFile);
      log(
        `cluster with the real node and ${String(LOAD_PODS + 1)} pods ready in ${String(Math.round(performance.now() - started))} ms`,
      );

      const port = await gateway.listen(HOST, 0);
      let shippedLines = 0;
      gateway.events.on('message', (message) => {
        if (message.payload?.$case === 'logs') shippedLines += message.payload.value.entries.length;
      });
      const executor = await startDemoExecutor({
        root,
        workdir: dir,
        kubeconfigPath: cluster.kubeconfigPath,
        commandKey: {
          id: gateway.commandSigner.keyId,
          publicKeyPem: gateway.commandSigner.publicKeyPem,
        },
      });
      running.add(executor.child);
      // Its log lines are drained and dropped: a pipe nobody reads fills at 64 KiB, and then the
      // executor's next log write blocks its event loop, the keystroke path's included.
      executor.child.stdout?.resume();
      executor.child.stderr?.resume();
      closers.push(async () => {
        if (executor.child.exitCode !== null) return;
        executor.child.kill('SIGTERM');
        await once(executor.child, 'exit');
      });
      await eventually(
        "the executor's socket",
        () => Promise.resolve(existsSync(executor.socketPath) ? true : undefined),
        { timeoutMs: 60_000, intervalMs: 100 },
      );
      const collector = startCollector(
        collectorConfig(dir, port, loadNamespace),
        cluster.kubeconfigPath,
        executor.socketPath,
      );
      log(
        `collector: ${collectorEntry()
          .map((arg) => (arg.startsWith(root) ? arg.slice(root.length + 1) : arg))
          .join(' ')}`,
      );
      closers.push(async () => {
        if (collector.exitCode !== null) return;
        collector.kill('SIGTERM');
        await once(collector, 'exit');
      });
      await eventually(
        'the collector connected with pod consoles',
        () => Promise.resolve(gateway.consoleAgents().length > 0 ? true : undefined),
        { timeoutMs: 60_000, intervalMs: 100 },
      );
      const agentSession = gateway.consoleAgents()[0] ?? '';
      // The first console starts the collector's relay thread: its open is timed beside a second
      // one's (opened, timed and closed at once).
      const firstOpen = await openConsole(gateway, agentSession, namespace, pod);
      const second = await openConsole(gateway, agentSession, namespace, pod);
      second.console.close('bench: timed only');
      log(
        `console open (the open frame sent until the executor's answer): the first ${ms(firstOpen.ms)} ms ` +
          `(it starts the collector's relay thread), the second ${ms(second.ms)} ms`,
      );
      const console = firstOpen.console;
      // Give `stty raw -echo` its moment before the first keystroke.
      await sleep(500);
      const agent = agentTypist(console);
      const bare = await bareTypist(kc, namespace, pod);
      closers.push(() => {
        agent.close();
        bare.close();
      });
      await type(agent, WARMUP_KEYS);
      await type(bare, WARMUP_KEYS);

      const idle = await measure(agent, bare);
      const results = rows('idle', idle, log);

      const writer = await startWriter(loadFile);
      await sleep(LOAD_WARMUP_MS);
      const loopDelay = monitorEventLoopDelay({ resolution: 10 });
      loopDelay.enable();
      const linesBefore = shippedLines;
      const loadStart = performance.now();
      const cpu = () => ({
        collector: cpuSeconds(collector.pid),
        executor: cpuSeconds(executor.child.pid),
        bench: cpuSeconds(process.pid),
      });
      let sampled = { lines: shippedLines, at: loadStart, cpu: cpu() };
      const benchCpuBefore = sampled.cpu.bench;
      // Every few seconds (stdout only): what the collector ships, and whether it gets the CPU.
      const sampler = setInterval(() => {
        const now = performance.now();
        const seconds = (now - sampled.at) / 1000;
        const used = cpu();
        process.stdout.write(
          `    load: ${String(Math.round((shippedLines - sampled.lines) / seconds))} lines/s shipped, ` +
            `collector ${String(Math.round(((used.collector - sampled.cpu.collector) * 100) / seconds))} % core, ` +
            `executor ${String(Math.round(((used.executor - sampled.cpu.executor) * 100) / seconds))} % core, ` +
            `bench ${String(Math.round(((used.bench - sampled.cpu.bench) * 100) / seconds))} % core, ` +
            `load average ${loadavg()[0]?.toFixed(1) ?? '?'}\n`,
        );
        sampled = { lines: shippedLines, at: now, cpu: used };
      }, 2000);
      const loaded = await measure(agent, bare).finally(() => {
        clearInterval(sampler);
      });
      const loadSeconds = (performance.now() - loadStart) / 1000;
      const benchCpu = ((cpuSeconds(process.pid) - benchCpuBefore) * 100) / loadSeconds;
      const shipped = (shippedLines - linesBefore) / loadSeconds;
      loopDelay.disable();
      await writer.stop();
      log(
        `log load: this process (the gateway and both typists) used ${String(Math.round(benchCpu))} % of a core, ` +
          `its event loop delay p99 ${ms(loopDelay.percentile(99) / 1e6)} ms, max ${ms(loopDelay.max / 1e6)} ms`,
      );
      log(
        `log load: the collector shipped ${String(Math.round(shipped))} lines/s to the gateway while measuring ` +
          `(writer: ${String(LOAD_PODS)} x ${String(LOAD_RATE_PER_POD)} lines/s of ${String(LINE_BYTES)} bytes)`,
      );
      results.push(...rows('log load', loaded, log));
      return results;
    } finally {
      for (const close of closers.reverse()) await close();
      await gateway.close();
      await stopCluster(options).catch(() => undefined);
      process.removeListener('exit', onExit);
    }
  },
};
