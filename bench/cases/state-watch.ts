// The state and events watch at scale (issue 16): PODS kwok pods (5000 by default), 50
// ReplicaSets and one Event per pod, watched by the compiled collector with state (pods,
// replicasets) and events (pod lifecycle, Kubernetes Events) on, beside a bare client-node
// watch of the same resources (makeInformer on pods, replicasets, events) in the same run.
//
// Definitions (fixed before measuring):
// - time to first sync: from the process's spawn until it has applied the first list of every
//   watch: the collector's /readyz is ok (source:state and source:events synced, connected to the
//   demo gateway, which accepted both event kinds), the baseline's informers have all started.
//   Target: under 10 s for 5000 pods.
// - steady-state RSS: VmRSS once nothing has arrived at the gateway for QUIET_MS after the sync.
//   Target: at most 250 MiB for the compiled collector (`node dist/js/collector/main.js`).
// - rollout: ROLLOUT pods (1000) deleted and as many created (each with an Event), as a
//   Deployment rollout does; events/s = what arrived (collector: state, lifecycle and Kubernetes
//   event messages stored by the gateway; baseline: informer callbacks) from the rollout's start
//   until the last arrival before QUIET_MS of silence. No target (the issue names none). Both
//   sides can only be as fast as the rollout is written: how long after the last write the last
//   arrival came (the lag) is logged beside it.
// KUBEXA_BENCH_STATE_PODS and KUBEXA_BENCH_STATE_ROLLOUT size it down for a quick run; the
// 10 s sync target is judged only at 5000 pods.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { AppsV1Api, CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { pino } from 'pino';
import { DemoGateway } from '../../demo-gateway/demo-gateway.js';
import {
  killClusterProcesses,
  startCluster,
  stopCluster,
  TEST_NODE_NAMES,
  type ClusterOptions,
} from '../../test/cluster/cluster.js';
import { loadKubeConfig } from '../../test/helpers/kube.js';
import type { BenchCase, BenchContext, BenchResult } from '../types.js';

const HOST = '127.0.0.1';
const TOKEN = 'bench-state-token-0123456789';
const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const PODS = Number(process.env['KUBEXA_BENCH_STATE_PODS'] ?? 5000);
const ROLLOUT = Math.min(PODS, Number(process.env['KUBEXA_BENCH_STATE_ROLLOUT'] ?? 1000));
const REPLICA_SETS = 50;
const NAMESPACE = 'bench';
const QUIET_MS = 5000;
const CREATE_CONCURRENCY = 48;
const SYNC_TARGET_S = 10;
const RSS_TARGET_MIB = 250;
const SYNC_TIMEOUT_MS = 300_000;

function rssMiB(pid: number): number {
  const status = readFileSync(`/proc/${String(pid)}/status`, 'utf8');
  const kib = /^VmRSS:\s+(\d+) kB/m.exec(status)?.[1];
  if (kib === undefined) throw new Error(`no VmRSS for pid ${String(pid)}`);
  return Number(kib) / 1024;
}

/** Cluster start attempts: a second one after a failed start (kwokctl's port clash). */
const START_ATTEMPTS = 2;

/**
 * startCluster, once more in a fresh directory when it fails (as the test harness's global
 * setup does): kwokctl picks its ports before binding them, and on this shared machine another
 * process can take one in between. `moved` receives the options of the retry.
 */
async function startClusterWithRetry(
  first: ClusterOptions,
  log: (line: string) => void,
  moved: (options: ClusterOptions) => void,
): Promise<Awaited<ReturnType<typeof startCluster>>> {
  let options = first;
  for (let attempt = 1; ; attempt++) {
    try {
      return await startCluster(options);
    } catch (err: unknown) {
      // startCluster already stopped what it started and removed its directory.
      if (attempt >= START_ATTEMPTS) throw err;
      log(`cluster start attempt ${String(attempt)} failed, retrying once: ${String(err)}`);
      options = { ...options, workdir: `${first.workdir}-${String(attempt + 1)}` };
      moved(options);
    }
  }
}

/** Runs `task` for 0..count-1, `CREATE_CONCURRENCY` at a time. */
async function pool(count: number, task: (i: number) => Promise<unknown>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: CREATE_CONCURRENCY }, async () => {
      while (next < count) await task(next++);
    }),
  );
}

/** A pod bound to a kwok node (kwok runs it), and an Event about it. */
async function createPod(core: CoreV1Api, name: string): Promise<void> {
  const node = TEST_NODE_NAMES[name.length % TEST_NODE_NAMES.length] ?? 'kwok-node-0';
  await core.createNamespacedPod({
    namespace: NAMESPACE,
    body: {
      metadata: { name, labels: { app: 'bench', tier: name.slice(0, 6) } },
      spec: { nodeName: node, containers: [{ name: 'app', image: 'registry.invalid/app:1' }] },
    },
  });
  const now = new Date();
  await core.createNamespacedEvent({
    namespace: NAMESPACE,
    body: {
      metadata: { name: `${name}.pulled` },
      involvedObject: { kind: 'Pod', name, namespace: NAMESPACE, apiVersion: 'v1' },
      reason: 'Pulled',
      message: 'Container image "registry.invalid/app:1" already present on machine',
      type: 'Normal',
      count: 1,
      firstTimestamp: now,
      lastTimestamp: now,
      source: { component: 'kubelet', host: node },
    },
  });
}

async function populate(kube: KubeConfig, log: (line: string) => void): Promise<void> {
  const core = kube.makeApiClient(CoreV1Api);
  const apps = kube.makeApiClient(AppsV1Api);
  const started = Date.now();
  await core.createNamespace({ body: { metadata: { name: NAMESPACE } } });
  // ReplicaSets that own nothing (their selector matches no pod): watched objects, not owners.
  await pool(REPLICA_SETS, (i) =>
    apps.createNamespacedReplicaSet({
      namespace: NAMESPACE,
      body: {
        metadata: { name: `rs-${String(i)}` },
        spec: {
          replicas: 0,
          selector: { matchLabels: { rs: String(i) } },
          template: {
            metadata: { labels: { rs: String(i) } },
            spec: { containers: [{ name: 'app', image: 'registry.invalid/app:1' }] },
          },
        },
      },
    }),
  );
  await pool(PODS, (i) => createPod(core, `pod-${String(i)}`));
  log(
    `created ${String(PODS)} pods, ${String(PODS)} events, ${String(REPLICA_SETS)} ReplicaSets in ${String(Date.now() - started)} ms`,
  );
}

/** The bare client-node watch: informers on pods, replicasets, events; counts every callback. */
const BASELINE = `
import { AppsV1Api, CoreV1Api, KubeConfig, makeInformer } from '@kubernetes/client-node';
const kc = new KubeConfig();
kc.loadFromDefault();
const core = kc.makeApiClient(CoreV1Api);
const apps = kc.makeApiClient(AppsV1Api);
let count = 0;
let last = 0;
const informers = [
  makeInformer(kc, '/api/v1/pods', () => core.listPodForAllNamespaces()),
  makeInformer(kc, '/apis/apps/v1/replicasets', () => apps.listReplicaSetForAllNamespaces()),
  makeInformer(kc, '/api/v1/events', () => core.listEventForAllNamespaces()),
];
for (const informer of informers) {
  for (const verb of ['add', 'update', 'delete']) {
    informer.on(verb, () => { count++; last = Date.now(); });
  }
  informer.on('error', (err) => { process.stderr.write(String(err) + '\\n'); });
}
await Promise.all(informers.map((i) => i.start()));
process.stdout.write('synced\\n');
createInterface({ input: process.stdin }).on('line', () => {
  process.stdout.write('count ' + count + ' ' + last + '\\n');
});
import { createInterface } from 'node:readline';
`;

interface Child {
  readonly child: ChildProcess;
  readonly exited: Promise<unknown>;
  readonly stderr: string[];
}

function track(child: ChildProcess): Child {
  const stderr: string[] = [];
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr.push(chunk.toString());
    if (stderr.length > 50) stderr.shift();
  });
  return { child, exited: once(child, 'exit'), stderr };
}

async function stop(c: Child): Promise<void> {
  if (c.child.exitCode !== null || c.child.signalCode !== null) return;
  c.child.kill('SIGTERM');
  const timer = setTimeout(() => c.child.kill('SIGKILL'), 20_000);
  await c.exited;
  clearTimeout(timer);
}

function collectorConfig(dir: string, healthPort: number, gatewayPort: number): string {
  const path = join(dir, 'collector.yaml');
  writeFileSync(
    path,
    [
      'gateway:',
      `  address: ${HOST}:${String(gatewayPort)}`,
      '  tls: false',
      'buffer:',
      `  spill_dir: ${JSON.stringify(join(dir, 'data'))}`,
      'observability:',
      `  health_addr: "${HOST}:${String(healthPort)}"`,
      `  metrics_addr: "${HOST}:0"`,
      'log:',
      '  level: warn',
      'collect:',
      '  logs: { enabled: false }',
      '  metrics: { enabled: false }',
      '  state:',
      '    resync_period: "0"',
      '    rules: [{resources: [pods, apps/v1/replicasets]}]',
      '  events: { enabled: true }',
      '',
    ].join('\n'),
  );
  return path;
}

async function freePort(): Promise<number> {
  const { createServer } = await import('node:net');
  return new Promise((resolve, reject) => {
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

/** Resolves when /readyz answers 200 (every watch synced, the gateway connected). */
async function readyAt(port: number, c: Child): Promise<number> {
  const deadline = Date.now() + SYNC_TIMEOUT_MS;
  for (;;) {
    if (c.child.exitCode !== null) {
      throw new Error(`the collector exited: ${c.stderr.join('').slice(-1500)}`);
    }
    try {
      const reply = await fetch(`http://${HOST}:${String(port)}/readyz`);
      if (reply.status === 200) return Date.now();
    } catch {
      // Not listening yet.
    }
    if (Date.now() > deadline) throw new Error('the collector did not become ready');
    await sleep(50);
  }
}

/** Waits until `count()` has not grown for QUIET_MS; returns the time of its last growth. */
async function quiet(count: () => Promise<{ n: number; last: number }>): Promise<number> {
  let previous = await count();
  let since = Date.now();
  for (;;) {
    await sleep(500);
    const now = await count();
    if (now.n !== previous.n) {
      previous = now;
      since = Date.now();
    } else if (Date.now() - since >= QUIET_MS) {
      return previous.last;
    }
  }
}

export const stateWatchBench: BenchCase = {
  name: 'state-watch',
  async run({ dir, log }: BenchContext): Promise<BenchResult[]> {
    const compiled = join(root, 'dist', 'js', 'collector', 'main.js');
    if (!existsSync(compiled))
      throw new Error(`no ${compiled}: run \`npm run build\` before this case`);
    let options: ClusterOptions = {
      name: `kubexa-bench-state-${String(process.pid)}`,
      workdir: join(dir, 'cluster'),
      env: process.env,
    };
    const children: Child[] = [];
    const onExit = (): void => {
      for (const c of children) c.child.kill('SIGKILL');
      killClusterProcesses(options.workdir, options.name);
    };
    process.once('exit', onExit);
    // Arrivals at the gateway: state, lifecycle and Kubernetes event messages, first deliveries.
    let arrived = 0;
    let lastArrival = 0;
    const gateway = new DemoGateway(
      { acceptToken: TOKEN, acceptedPayloads: ['pod_lifecycle', 'kube_event'] },
      { logger: pino({ level: 'silent' }) },
    );
    gateway.events.on('message', (message, isNew) => {
      const kind = message.payload?.$case;
      if (!isNew || (kind !== 'state' && kind !== 'podLifecycle' && kind !== 'kubeEvent')) return;
      arrived++;
      lastArrival = Date.now();
    });
    try {
      const cluster = await startClusterWithRetry(options, log, (next) => {
        options = next;
      });
      const kube = loadKubeConfig(cluster.kubeconfigPath);
      await populate(kube, log);
      const gatewayPort = await gateway.listen(HOST, 0);
      const env: NodeJS.ProcessEnv = {
        ...process.env,
        KUBECONFIG: cluster.kubeconfigPath,
        KUBEXA_TENANT_TOKEN: TOKEN,
      };
      delete env['KUBERNETES_SERVICE_HOST'];
      delete env['KUBEXA_AGENT_ID'];
      delete env['NODE_OPTIONS'];

      // The baseline first, alone; then the collector, alone: neither syncs in the other's way.
      const baselineStart = Date.now();
      const baseline = track(
        spawn(process.execPath, ['--input-type=module', '-e', BASELINE], {
          cwd: root,
          env,
          stdio: ['pipe', 'pipe', 'pipe'],
        }),
      );
      children.push(baseline);
      const lines = createInterface({ input: baseline.child.stdout ?? process.stdin });
      const waiters: ((line: string) => void)[] = [];
      lines.on('line', (line) => waiters.shift()?.(line));
      const nextLine = (): Promise<string> =>
        new Promise((resolve, reject) => {
          waiters.push(resolve);
          void baseline.exited.then(() => {
            reject(new Error(`the baseline exited: ${baseline.stderr.join('').slice(-1500)}`));
          });
        });
      await nextLine();
      const baselineSyncMs = Date.now() - baselineStart;
      const baselineCount = async (): Promise<{ n: number; last: number }> => {
        const reply = nextLine();
        baseline.child.stdin?.write('\n');
        const [, n = '0', last = '0'] = (await reply).split(' ');
        return { n: Number(n), last: Number(last) };
      };
      log(`baseline synced in ${String(baselineSyncMs)} ms`);

      const healthPort = await freePort();
      const collectorStart = Date.now();
      const collector = track(
        spawn(
          process.execPath,
          [compiled, `--config=${collectorConfig(dir, healthPort, gatewayPort)}`],
          {
            cwd: root,
            env,
            stdio: ['ignore', 'ignore', 'pipe'],
          },
        ),
      );
      children.push(collector);
      const collectorSyncMs = (await readyAt(healthPort, collector)) - collectorStart;
      log(`collector ready (every watch synced) in ${String(collectorSyncMs)} ms`);
      await quiet(() => Promise.resolve({ n: arrived, last: lastArrival }));
      await quiet(baselineCount);
      const pid = collector.child.pid ?? 0;
      const steady = { collector: rssMiB(pid), baseline: rssMiB(baseline.child.pid ?? 0) };
      log(
        `steady RSS: collector ${steady.collector.toFixed(1)} MiB, baseline ${steady.baseline.toFixed(1)} MiB; ${String(arrived)} messages at the gateway`,
      );

      // The rollout: ROLLOUT pods replaced by as many new ones.
      const core = kube.makeApiClient(CoreV1Api);
      const before = { collector: arrived, baseline: (await baselineCount()).n };
      const rolloutStart = Date.now();
      await pool(ROLLOUT, async (i) => {
        await core.deleteNamespacedPod({ name: `pod-${String(i)}`, namespace: NAMESPACE });
        await createPod(core, `pod-new-${String(i)}`);
      });
      const written = Date.now();
      log(`rollout of ${String(ROLLOUT)} pods written in ${String(written - rolloutStart)} ms`);
      const collectorLast = await quiet(() => Promise.resolve({ n: arrived, last: lastArrival }));
      const baselineLast = await quiet(baselineCount);
      const baselineAfter = (await baselineCount()).n;
      const collectorEvents = arrived - before.collector;
      const baselineEvents = baselineAfter - before.baseline;
      const collectorRate = (collectorEvents * 1000) / Math.max(1, collectorLast - rolloutStart);
      const baselineRate = (baselineEvents * 1000) / Math.max(1, baselineLast - rolloutStart);
      log(
        `rollout: collector ${String(collectorEvents)} messages in ${String(collectorLast - rolloutStart)} ms (last ${String(collectorLast - written)} ms after the last write), baseline ${String(baselineEvents)} watch events in ${String(baselineLast - rolloutStart)} ms (${String(baselineLast - written)} ms after)`,
      );
      const peak = rssMiB(pid);
      log(`collector RSS after the rollout ${peak.toFixed(1)} MiB`);
      return [
        {
          name: `time to first sync, ${String(PODS)} pods + RS + events`,
          unit: 's',
          itemsPerSecond: collectorSyncMs / 1000,
          baselineName: 'bare client-node informers',
          baselineItemsPerSecond: baselineSyncMs / 1000,
          ...(PODS >= 5000 ? { targetAtMost: SYNC_TARGET_S } : {}),
        },
        {
          name: `steady RSS, ${String(PODS)} pods (compiled collector)`,
          unit: 'MiB',
          itemsPerSecond: steady.collector,
          baselineName: 'bare client-node informers',
          baselineItemsPerSecond: steady.baseline,
          targetAtMost: RSS_TARGET_MIB,
        },
        {
          name: `rollout of ${String(ROLLOUT)} pods, events/s through the pipeline`,
          itemsPerSecond: collectorRate,
          baselineName: 'bare client-node informers (callbacks/s)',
          baselineItemsPerSecond: baselineRate,
        },
      ];
    } finally {
      for (const c of children.reverse()) await stop(c);
      await gateway.close();
      await stopCluster(options);
      process.off('exit', onExit);
    }
  },
};
