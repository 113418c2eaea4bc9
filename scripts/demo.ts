// `npm run demo`: the demo gateway (gRPC + web UI, in this process) and the real collector
// process connected to it, against the current kubeconfig, or, when none is reachable (or with
// --local-cluster), against a local test cluster started here and removed on exit. Prints the
// UI's URL and the collector's log lines until Ctrl-C.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { pino } from 'pino';
import { DemoGateway } from '../demo-gateway/demo-gateway.js';
import { createWebUi } from '../demo-gateway/web-ui.js';
import { ConfigSnapshot } from '../proto/index.js';
import { startCluster, stopCluster, type ClusterOptions } from '../test/cluster/cluster.js';

const HOST = '127.0.0.1';
const root = join(dirname(fileURLToPath(import.meta.url)), '..');
// The demo's own token: the gateway checks it, the collector gets it through its env variable.
const DEMO_TOKEN = 'kubexa-demo-token';
const REACH_TIMEOUT_MS = 5000;
const COLLECTOR_STOP_MS = 35_000;

const USAGE = `usage: npm run demo [-- --http-port 8090] [--grpc-port 0] [--local-cluster]
  --local-cluster   ignore the current kubeconfig and start a local test cluster`;

interface Cleanup {
  readonly what: string;
  run(): Promise<void>;
}
const cleanups: Cleanup[] = [];

function say(line: string): void {
  process.stdout.write(`${line}\n`);
}

/** The current kubeconfig, if one is configured and its API server answers. */
async function reachableKubeconfig(): Promise<{ path: string; server: string } | undefined> {
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
    return { path, server };
  } catch (err: unknown) {
    say(`no reachable cluster in the current kubeconfig (${firstLine(err)})`);
    return undefined;
  }
}

function firstLine(err: unknown): string {
  const text = err instanceof Error ? err.message : String(err);
  return text.split('\n')[0] ?? text;
}

async function localCluster(): Promise<string> {
  const options: ClusterOptions = {
    name: 'kubexa-demo',
    workdir: await mkdtemp(join(tmpdir(), 'kubexa-demo-cluster-')),
    env: process.env,
  };
  say(
    `starting a local test cluster in ${options.workdir} (the first run on a machine builds its binaries: ~10 min)`,
  );
  cleanups.push({ what: 'local cluster', run: () => stopCluster(options) });
  const cluster = await startCluster(options);
  say(`local cluster up in ${cluster.startMs} ms; kubeconfig ${cluster.kubeconfigPath}`);
  say(`  kubectl: export KUBECONFIG=${cluster.kubeconfigPath} PATH=${cluster.binDir}:$PATH`);
  return cluster.kubeconfigPath;
}

function collectorConfig(grpcPort: number, spillDir: string): string {
  return [
    'gateway:',
    `  address: ${HOST}:${grpcPort}`,
    '  tls: false',
    '  reconnect_initial_delay: 500ms',
    '  reconnect_max_delay: 5s',
    'buffer:',
    `  spill_dir: ${JSON.stringify(spillDir)}`,
    'observability:',
    `  health_addr: "${HOST}:0"`,
    `  metrics_addr: "${HOST}:0"`,
    'log:',
    '  level: info',
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

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      'http-port': { type: 'string', default: '8090' },
      'grpc-port': { type: 'string', default: '0' },
      'local-cluster': { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    say(USAGE);
    return;
  }
  const existing = values['local-cluster'] ? undefined : await reachableKubeconfig();
  let kubeconfigPath: string;
  if (existing) {
    say(`using the current kubeconfig: ${existing.path} (API server ${existing.server})`);
    kubeconfigPath = existing.path;
  } else {
    kubeconfigPath = await localCluster();
  }

  const gateway = new DemoGateway(
    {
      acceptToken: DEMO_TOKEN,
      tokenFailure: 'unauthenticated',
      // Heartbeats every 5 s instead of 30 s, so the UI shows the agent's health moving.
      initialConfig: ConfigSnapshot.fromPartial({ heartbeatIntervalSec: 5 }),
    },
    { logger: pino({ level: 'warn' }) },
  );
  const grpcPort = await gateway.listen(HOST, Number(values['grpc-port']));
  const ui = createWebUi(gateway);
  let url: string;
  try {
    url = await ui.listen({ host: HOST, port: Number(values['http-port']) });
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

  const workdir = await mkdtemp(join(tmpdir(), 'kubexa-demo-'));
  cleanups.push({ what: 'demo files', run: () => rm(workdir, { recursive: true, force: true }) });
  const configPath = join(workdir, 'config.yaml');
  await writeFile(configPath, collectorConfig(grpcPort, join(workdir, 'data')));
  const collector = spawn(
    process.execPath,
    ['--import', 'tsx', join(root, 'collector', 'main.ts'), `--config=${configPath}`],
    {
      cwd: root,
      env: { ...process.env, KUBECONFIG: kubeconfigPath, KUBEXA_TENANT_TOKEN: DEMO_TOKEN },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
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

  say('');
  say(`demo gateway UI: ${url}`);
  say(`  gRPC ${HOST}:${grpcPort} (plaintext), collector config ${configPath}`);
  say('  shows the connected collector (cluster id = kube-system UID, agent id, heartbeats');
  say('  every 5 s with queue depth and drops) and every message it sends; Ctrl-C stops all.');
  say('');

  const session = await Promise.race([
    gateway.waitForSession(),
    exited.then(([code, signal]) => {
      throw new Error(
        `the collector exited (${signal ?? `code ${String(code)}`}) before connecting`,
      );
    }),
  ]);
  say(`collector connected: cluster ${session.clusterId}, agent ${session.agentId}`);
  const [code, signal] = await exited;
  if (!stopping) throw new Error(`the collector exited (${signal ?? `code ${String(code)}`})`);
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
