// `npm run demo`: the demo gateway (gRPC + web UI, in this process) and the real collector
// process connected to it. By default against a local test cluster started here (with a sample
// workload writing logs) and removed on exit; against the current kubeconfig's cluster only with
// --current-context, after printing its context and server and asking (unless --yes). Prints the
// UI's URL, the collector's health and metrics URLs, and its log lines until Ctrl-C.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { pino } from 'pino';
import { DemoGateway } from '../demo-gateway/demo-gateway.js';
import { ensureUiBuilt } from '../demo-gateway/ui-build.js';
import { createWebUi } from '../demo-gateway/web-ui.js';
import { ConfigSnapshot } from '../proto/index.js';
import {
  clusterVersions,
  startCluster,
  stopCluster,
  TEST_NODE_NAMES,
  type ClusterOptions,
} from '../test/cluster/cluster.js';
import { pinLocalImage } from '../test/node/helper-image.js';
import { ensureDemoBundle } from './demo-bundle.js';
import { startDemoExecutor, type DemoNodeConsole } from './demo-executor.js';
import {
  CRASHLOOP,
  CRASHLOOP_EXIT_CODE,
  startRealNodePods,
  TOOLBOX,
} from './demo-real-node-pod.js';
import { startDemoMetrics } from './demo-metrics.js';
import { SAMPLE_APPS, startSampleWorkload, type SampleWorkload } from './demo-workload.js';

const HOST = '127.0.0.1';
const root = join(dirname(fileURLToPath(import.meta.url)), '..');
// The demo's own token: the gateway checks it, the collector gets it through its env variable.
const DEMO_TOKEN = 'kubexa-demo-token';
const REACH_TIMEOUT_MS = 5000;
const COLLECTOR_STOP_MS = 35_000;

const USAGE = `usage: npm run demo [-- --http-port 8090] [--grpc-port 0] [--current-context [--yes]]
  (default)          start a local test cluster with a sample workload, removed on exit
  --current-context  use the cluster of the current kubeconfig instead; prints its context and
                     API server and asks before connecting (the collector reads pod logs there)
  --yes              do not ask (for scripts)`;

interface Cleanup {
  readonly what: string;
  run(): Promise<void>;
}
const cleanups: Cleanup[] = [];

function say(line: string): void {
  process.stdout.write(`${line}\n`);
}

const startedAt = performance.now();
/** Seconds since the demo started, for the milestones it prints (where the first 15 s go). */
const since = (): string => `${((performance.now() - startedAt) / 1000).toFixed(1)} s`;

/** The current kubeconfig, if one is configured and its API server answers. */
async function reachableKubeconfig(): Promise<
  { path: string; server: string; context: string } | undefined
> {
  const path = process.env['KUBECONFIG'] ?? join(process.env['HOME'] ?? '', '.kube', 'config');
  if (!process.env['KUBECONFIG'] && !existsSync(path)) {
    say(`no kubeconfig (KUBECONFIG is unset and ${path} does not exist)`);
    return undefined;
  }
  const kube = new KubeConfig();
  try {
    kube.loadFromDefault();
    const server = kube.getCurrentCluster()?.server;
    if (server === undefined) return undefined;
    const core = kube.makeApiClient(CoreV1Api);
    const timeout = new Promise<never>((_resolve, reject) => {
      setTimeout(() => {
        reject(new Error('timed out'));
      }, REACH_TIMEOUT_MS).unref();
    });
    await Promise.race([core.readNamespace({ name: 'kube-system' }), timeout]);
    return { path, server, context: kube.getCurrentContext() };
  } catch (err: unknown) {
    say(`no reachable cluster in the current kubeconfig (${firstLine(err)})`);
    return undefined;
  }
}

function firstLine(err: unknown): string {
  const text = err instanceof Error ? err.message : String(err);
  return text.split('\n')[0] ?? text;
}

/** Asks on the terminal; false without one (use --yes in scripts). */
async function confirm(question: string): Promise<boolean> {
  if (!process.stdin.isTTY) {
    say(`${question} no terminal to ask on: pass --yes to go ahead`);
    return false;
  }
  const rl = createInterface({ input: process.stdin, output: process.stdout });
  const answer = await new Promise<string>((resolve) => {
    rl.question(`${question} [y/N] `, resolve);
  });
  rl.close();
  return /^y(es)?$/i.test(answer.trim());
}

/** A free loopback port for the collector's health and metrics servers, so they can be printed. */
function freePort(): Promise<number> {
  return new Promise<number>((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, HOST, () => {
      const address = server.address();
      server.close(() => {
        if (address !== null && typeof address === 'object') resolve(address.port);
        else reject(new Error('no port'));
      });
    });
  });
}

interface Cluster {
  readonly kubeconfigPath: string;
  /** Where the bundled kubectl and helm are (local cluster only). */
  readonly binDir: string | undefined;
  readonly local: boolean;
}

async function currentCluster(yes: boolean): Promise<Cluster> {
  const existing = await reachableKubeconfig();
  if (!existing)
    throw new Error('--current-context: the current kubeconfig has no reachable cluster');
  say(`current kubeconfig: ${existing.path}`);
  say(`  context: ${existing.context}`);
  say(`  API server: ${existing.server}`);
  say('  the collector will read every pod log and the cluster state it is allowed to there.');
  if (!yes && !(await confirm(`connect the demo to context "${existing.context}"?`))) {
    throw new Error(
      'not confirmed: nothing was started (the default, without --current-context, is a local cluster)',
    );
  }
  return { kubeconfigPath: existing.path, binDir: undefined, local: false };
}

async function localCluster(): Promise<string> {
  const options: ClusterOptions = {
    name: 'kubexa-demo',
    workdir: await mkdtemp(join(tmpdir(), 'kubexa-demo-cluster-')),
    env: process.env,
    // The real node runs real containers, so a console from the page opens a real shell.
    realNode: true,
  };
  say(
    `starting a local test cluster with a real node in ${options.workdir} (the first run on a machine builds its binaries: ~10 min)`,
  );
  cleanups.push({ what: 'local cluster', run: () => stopCluster(options) });
  let cluster;
  try {
    cluster = await startCluster(options);
  } catch (err: unknown) {
    const message = err instanceof Error ? err.message : String(err);
    if (!message.includes('the real node cannot start on this machine')) throw err;
    // Said loudly, not skipped silently: consoles need the real node; the rest of the demo not.
    say(`WITHOUT the real node: ${message}`);
    say('  the Consoles view will show every pod as simulated (kwok): no console can open;');
    say(
      `  no ${CRASHLOOP.namespace}/${CRASHLOOP.name} either: the Events view shows no CrashLoopBackOff (kwok pods never crash).`,
    );
    cluster = await startCluster({ ...options, realNode: false });
  }
  say(
    `local cluster up in ${cluster.startMs} ms (at ${since()}); kubeconfig ${cluster.kubeconfigPath}`,
  );
  localBinDir = cluster.binDir;
  localRealNode = cluster.realNode !== undefined;
  if (cluster.realNode !== undefined) {
    // Node consoles on the real node: the local busybox image pinned by digest as the helper,
    // and the kubelet as the nsenter target (PID 1 of these machines cannot be entered).
    localNodeConsole = {
      node: cluster.realNode.name,
      image: pinLocalImage(
        cluster.binDir,
        cluster.realNode.containerdSocket,
        clusterVersions()['BUSYBOX_IMAGE'] ?? '',
      ),
      targetPid: cluster.realNode.kubeletPid,
    };
    say(`real node ${cluster.realNode.name} up: node consoles on (Consoles view)`);
  }
  return cluster.kubeconfigPath;
}
let localBinDir: string | undefined;
let localRealNode = false;
let localNodeConsole: DemoNodeConsole | undefined;

function loadKube(path: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromFile(path);
  return kc;
}

interface CollectorPorts {
  readonly grpc: number;
  readonly health: number;
  readonly metrics: number;
}

function collectorConfig(
  ports: CollectorPorts,
  spillDir: string,
  collect: readonly string[] = [],
): string {
  return [
    'gateway:',
    `  address: ${HOST}:${ports.grpc}`,
    '  tls: false',
    '  reconnect_initial_delay: 500ms',
    '  reconnect_max_delay: 5s',
    'buffer:',
    `  spill_dir: ${JSON.stringify(spillDir)}`,
    // Batches leave within a quarter second (the default is 1 s): the views fill sooner.
    '  flush_interval: 250ms',
    'observability:',
    `  health_addr: "${HOST}:${ports.health}"`,
    `  metrics_addr: "${HOST}:${ports.metrics}"`,
    'log:',
    '  level: info',
    // The Nodes view reads nodes and pods through the agent; the rest is the default state list.
    'query:',
    '  rules:',
    '    - {id: demo-nodes-view, resources: [nodes, pods, services, secrets, deployments]}',
    'collect:',
    // Said, not left to the default: the Events view's pod lifecycle and Kubernetes events (the
    // demo gateway accepts both kinds in its handshake, startGateway).
    '  events: { enabled: true, pod_lifecycle: true, kubernetes_events: true }',
    ...collect,
    '',
  ].join('\n');
}

const HIDDEN_LOG_KEYS = new Set(['time', 'pid', 'hostname', 'process']);

/** Prints the collector's JSON log lines as `collector | level message {fields}`. */
function relayLogs(child: ChildProcess): void {
  const levels: Record<number, string> = {
    10: 'trace',
    20: 'debug',
    30: 'info',
    40: 'warn',
    50: 'error',
    60: 'fatal',
  };
  if (child.stdout) {
    createInterface({ input: child.stdout }).on('line', (line) => {
      try {
        const { level, msg, ...all } = JSON.parse(line) as {
          level: number;
          msg: string;
          [key: string]: unknown;
        };
        const rest = Object.fromEntries(
          Object.entries(all).filter(([key]) => !HIDDEN_LOG_KEYS.has(key)),
        );
        const fields = Object.keys(rest).length > 0 ? ` ${JSON.stringify(rest)}` : '';
        say(`collector | ${levels[level] ?? String(level)} ${msg}${fields}`);
      } catch {
        say(`collector | ${line}`);
      }
    });
  }
  child.stderr?.on('data', (chunk: Buffer) =>
    process.stderr.write(`collector ! ${chunk.toString()}`),
  );
}

/** Waits until the executor's socket exists (a few seconds; longer on a loaded machine). */
async function waitForSocket(path: string): Promise<void> {
  for (let i = 0; i < 300 && !existsSync(path); i++) {
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      'http-port': { type: 'string', default: '8090' },
      'grpc-port': { type: 'string', default: '0' },
      'current-context': { type: 'boolean', default: false },
      yes: { type: 'boolean', default: false },
      // The old flag: the local cluster is the default now.
      'local-cluster': { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    say(USAGE);
    return;
  }
  // The collector's and executor's bundle, the web UI's first build and the cluster's start
  // overlap: none needs another.
  const bundled = processArgs();
  bundled.catch(() => undefined);
  // The web UI's first build and the cluster's start overlap: neither needs the other.
  const uiBuilt = ensureUiBuilt().then((built) => {
    if (built) say(`built the web UI (dist/demo-ui) at ${since()}`);
  });
  uiBuilt.catch(() => undefined);
  const cluster: Cluster = values['current-context']
    ? await currentCluster(values.yes)
    : { kubeconfigPath: await localCluster(), binDir: localBinDir, local: true };
  await uiBuilt;

  const { gateway, grpcPort, url } = await startGateway(
    cluster,
    values['grpc-port'],
    values['http-port'],
  );

  const workdir = await mkdtemp(join(tmpdir(), 'kubexa-demo-'));
  cleanups.push({ what: 'demo files', run: () => rm(workdir, { recursive: true, force: true }) });
  // Everything below needs only the cluster and the gateway, so it starts at once and together
  // (on two busy cores each process's start is mostly waiting for CPU): the executor process,
  // the metrics sources, the sample workload and the real node's pods. The collector needs the
  // executor's socket (it asks it at start whether to advertise consoles) and the config.
  const nodeArgs = await bundled;
  const executor = await startExecutor(cluster, workdir, gateway, nodeArgs.executor);
  // The sample workload is created while the executor and the collector start (its pods take a
  // few seconds to run): the collector finds them through its watch.
  const workloadStarted = cluster.local ? startWorkload(cluster, workdir) : undefined;
  workloadStarted?.catch(() => undefined);
  const realNodePods = localRealNode
    ? startRealNodePods(loadKube(cluster.kubeconfigPath))
    : undefined;
  realNodePods?.catch(() => undefined);
  const ports: CollectorPorts = {
    grpc: grpcPort,
    health: await freePort(),
    metrics: await freePort(),
  };
  // Metrics on, with a sample Prometheus endpoint and a pprof target: the Metrics view fills at once.
  const demoMetrics = await startMetricsSources(cluster);
  const configPath = join(workdir, 'config.yaml');
  await writeFile(
    configPath,
    collectorConfig(ports, join(workdir, 'data'), demoMetrics.configLines),
  );
  await waitForSocket(executor.socketPath);
  say(`executor listening at ${since()}`);
  const collector = spawn(process.execPath, [...nodeArgs.collector, `--config=${configPath}`], {
    cwd: root,
    env: {
      ...process.env,
      KUBECONFIG: cluster.kubeconfigPath,
      KUBEXA_TENANT_TOKEN: DEMO_TOKEN,
      KUBEXA_EXECUTOR_SOCKET: executor.socketPath,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = once(collector, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
  cleanups.push({
    what: 'collector',
    run: async () => {
      if (collector.exitCode !== null || collector.signalCode !== null) return;
      collector.kill('SIGTERM');
      const timer = setTimeout(() => collector.kill('SIGKILL'), COLLECTOR_STOP_MS);
      await exited;
      clearTimeout(timer);
    },
  });
  relayLogs(collector);
  if (workloadStarted) await sampleWorkloadUp(workloadStarted, realNodePods);

  printBanner({ url, grpcPort, ports, configPath, cluster });

  const session = await Promise.race([
    gateway.waitForSession(),
    exited.then(([code, signal]) => {
      throw new Error(
        `the collector exited (${signal ?? `code ${String(code)}`}) before connecting`,
      );
    }),
  ]);
  say(`collector connected at ${since()}: cluster ${session.clusterId}, agent ${session.agentId}`);
  const [code, signal] = await exited;
  if (!stopping) throw new Error(`the collector exited (${signal ?? `code ${String(code)}`})`);
}

/**
 * How node starts the collector and the executor: from their bundle (what the images run; it
 * loads in a fraction of the time the sources take through tsx), or from the sources when the
 * bundle cannot be built, said loudly.
 */
async function processArgs(): Promise<Record<'collector' | 'executor', string[]>> {
  try {
    const bundle = await ensureDemoBundle(root);
    say(
      `collector and executor: ${bundle.built ? 'bundled' : 'the current bundle'} in ${bundle.dir} (at ${since()})`,
    );
    return { collector: bundle.args('collector'), executor: bundle.args('executor') };
  } catch (err: unknown) {
    say(
      `could not bundle the collector and executor, running their sources through tsx: ${firstLine(err)}`,
    );
    const sources = (name: string) => ['--import', 'tsx', join(root, name, 'main.ts')];
    return { collector: sources('collector'), executor: sources('executor') };
  }
}

/** The executor process, started at once; its socket is waited for before the collector starts. */
async function startExecutor(
  cluster: Cluster,
  workdir: string,
  gateway: DemoGateway,
  nodeArgs: readonly string[],
): Promise<Awaited<ReturnType<typeof startDemoExecutor>>> {
  const executor = await startDemoExecutor({
    root,
    nodeArgs,
    workdir,
    kubeconfigPath: cluster.kubeconfigPath,
    commandKey: {
      id: gateway.commandSigner.keyId,
      publicKeyPem: gateway.commandSigner.publicKeyPem,
    },
    // The Nodes view's cordon, uncordon and drain: the local cluster's kwok nodes only.
    nodeJobs: cluster.local,
    ...(localNodeConsole === undefined ? {} : { nodeConsole: localNodeConsole }),
  });
  cleanups.push({
    what: 'executor',
    run: async () => {
      if (executor.child.exitCode !== null || executor.child.signalCode !== null) return;
      const gone = once(executor.child, 'exit');
      executor.child.kill('SIGTERM');
      await gone;
    },
  });
  executor.child.stdout?.on('data', (chunk: Buffer) => {
    for (const line of chunk.toString().split('\n')) if (line.trim()) say(`executor | ${line}`);
  });
  executor.child.stderr?.on('data', (chunk: Buffer) =>
    process.stderr.write(`executor ! ${chunk.toString()}`),
  );
  return executor;
}

/** Which view each payload kind fills, for the "first data" milestones. */
const VIEW_OF_PAYLOAD: Readonly<Record<string, string>> = {
  logs: 'Logs',
  state: 'State',
  kubeEvent: 'Events',
  podLifecycle: 'Events',
  kubeMetrics: 'Metrics',
  prometheusMetrics: 'Metrics',
  catalog: 'Query',
};

/** Prints when each view first has data, from the demo's start and from the banner. */
function watchFirstData(gateway: DemoGateway): void {
  const pending = new Set(Object.values(VIEW_OF_PAYLOAD));
  const onMessage = (message: { payload?: { $case: string } | undefined }): void => {
    const view = VIEW_OF_PAYLOAD[message.payload?.$case ?? ''];
    if (view === undefined || !pending.delete(view)) return;
    const afterBanner =
      bannerAt === undefined
        ? 'before the banner'
        : `${((performance.now() - bannerAt) / 1000).toFixed(1)} s after the banner`;
    say(
      `first data for the ${view} view at ${since()} (${afterBanner}, ${message.payload?.$case ?? ''})`,
    );
    if (pending.size === 0) gateway.events.off('message', onMessage);
  };
  gateway.events.on('message', onMessage);
}
let bannerAt: number | undefined;

/** The demo gateway and its web UI, listening; stopped by the cleanups. */
async function startGateway(
  cluster: Cluster,
  grpcPortArg: string,
  httpPortArg: string,
): Promise<{ gateway: DemoGateway; grpcPort: number; url: string }> {
  const gateway = new DemoGateway(
    {
      acceptToken: DEMO_TOKEN,
      tokenFailure: 'unauthenticated',
      // Heartbeats every 5 s instead of 30 s, so the UI shows the agent's health moving.
      initialConfig: ConfigSnapshot.fromPartial({ heartbeatIntervalSec: 5 }),
      // This gateway decodes lifecycle and Kubernetes events: the collector may send them.
      acceptedPayloads: ['pod_lifecycle', 'kube_event'],
    },
    { logger: pino({ level: 'warn' }) },
  );
  // kwok's nodes only simulate pods: the Consoles view explains instead of failing on them.
  if (cluster.local) gateway.consoles.markSimulatedNodes(TEST_NODE_NAMES);
  const grpcPort = await gateway.listen(HOST, Number(grpcPortArg));
  watchFirstData(gateway);
  const ui = createWebUi(gateway);
  let url: string;
  try {
    url = await ui.listen({ host: HOST, port: Number(httpPortArg) });
  } catch {
    url = await ui.listen({ host: HOST, port: 0 });
  }
  cleanups.push({
    what: 'demo gateway',
    run: async () => {
      await ui.close();
      await gateway.close();
    },
  });

  return { gateway, grpcPort, url };
}

/** A sample Prometheus endpoint and a pprof target, so the Metrics view fills at once. */
async function startMetricsSources(
  cluster: Cluster,
): Promise<Awaited<ReturnType<typeof startDemoMetrics>>> {
  const demoMetrics = await startDemoMetrics({
    binDir: cluster.binDir,
    kc: cluster.local ? loadKube(cluster.kubeconfigPath) : undefined,
    namespaces: cluster.local ? [...new Set(SAMPLE_APPS.map((a) => a.namespace))] : [],
    podLabel: 'kubexa.io/demo=true',
  });
  cleanups.push({ what: 'demo metrics sources', run: () => demoMetrics.stop() });
  say(`metrics sources: ${demoMetrics.describe}`);
  return demoMetrics;
}

/** Waits for the sample workload (registering its cleanup) and the real node's pods. */
async function sampleWorkloadUp(
  workloadStarted: Promise<SampleWorkload>,
  realNodePods: Promise<void> | undefined,
): Promise<void> {
  const workload = await workloadStarted;
  cleanups.push({
    what: 'sample workload',
    run: () => {
      workload.stop();
      return Promise.resolve();
    },
  });
  say(
    `sample workload (at ${since()}): ${SAMPLE_APPS.map((a) => `${a.namespace}/${a.name}`).join(', ')} (access logs, JSON logs with levels, a stack trace every 20 s)`,
  );
  if (realNodePods !== undefined) {
    await realNodePods;
    say(
      `on the real node: ${TOOLBOX.namespace}/${TOOLBOX.name} (busybox, the Consoles view's target) and ${CRASHLOOP.namespace}/${CRASHLOOP.name} (exits ${String(CRASHLOOP_EXIT_CODE)} after a few lines: CrashLoopBackOff in the Events view, its lines in Logs)`,
    );
  }
}

function startWorkload(cluster: Cluster, workdir: string): Promise<SampleWorkload> {
  return startSampleWorkload(loadKube(cluster.kubeconfigPath), workdir);
}

function printBanner(info: {
  url: string;
  grpcPort: number;
  ports: CollectorPorts;
  configPath: string;
  cluster: Cluster;
}): void {
  const { cluster, ports } = info;
  bannerAt = performance.now();
  say(`banner at ${since()}`);
  const rule = '─'.repeat(78);
  say('');
  say(rule);
  say(
    `  Kubexa demo:     ${info.url}    (every view in the left navigation; Ctrl-C stops everything)`,
  );
  say(`  demo gateway:    gRPC ${HOST}:${info.grpcPort} (plaintext, token checked)`);
  say(
    `  collector:       health http://${HOST}:${ports.health}/healthz (/readyz)   metrics http://${HOST}:${ports.metrics}/metrics`,
  );
  say(`                   config ${info.configPath}`);
  if (cluster.binDir !== undefined) {
    const helm = existsSync(join(cluster.binDir, 'helm')) ? 'kubectl and helm' : 'kubectl';
    say(`  ${helm} for this cluster:`);
    say(`    export KUBECONFIG=${cluster.kubeconfigPath} PATH=${cluster.binDir}:$PATH`);
  } else {
    say(`  cluster:         current kubeconfig ${cluster.kubeconfigPath}`);
  }
  say(rule);
  say('');
}

let stopping = false;
async function cleanup(): Promise<void> {
  for (const step of cleanups.splice(0).reverse()) {
    try {
      await step.run();
    } catch (err: unknown) {
      process.stderr.write(`demo: could not stop the ${step.what}: ${firstLine(err)}\n`);
    }
  }
}

const onSignal = (): void => {
  if (stopping) return;
  stopping = true;
  say('\nstopping: collector (SIGTERM), demo gateway, local cluster if one was started');
  void cleanup().then(() => {
    say('demo stopped');
    process.exit(0);
  });
};
process.on('SIGINT', onSignal);
process.on('SIGTERM', onSignal);

main().catch(async (err: unknown) => {
  process.stderr.write(`demo failed: ${err instanceof Error ? err.message : String(err)}\n`);
  stopping = true;
  await cleanup();
  process.exit(1);
});
