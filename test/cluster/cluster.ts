// The real test cluster: etcd, kube-apiserver (RBAC on, signed ServiceAccount tokens),
// kube-controller-manager, kube-scheduler, kwok (the fake kubelet) and metrics-server, all bound to
// 127.0.0.1 and started by kwokctl's binary runtime from binaries that build.sh compiled from the Go
// module proxy. kwok's nodes carry loopback addresses only, so nothing ever dials a pod or Service IP.
//
// With `realNode`, a real worker node (node.ts: containerd, runc, CNI, kubelet, kube-proxy) joins
// beside the kwok nodes, in a network namespace of its own. The control plane stays on loopback;
// the node reaches the API server through a relay on the machine's end of the node's veth.
import { execFile, spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { mkdir, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { join, dirname } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { ApiregistrationV1Api, CoreV1Api, KubeConfig, type V1Node } from '@kubernetes/client-node';
import { parseAllDocuments, stringify } from 'yaml';
import { ensureInotifyInstances, type InotifyLimit } from './inotify.js';
import {
  apiServerPort,
  createNodeNetwork,
  missingNodePrerequisites,
  nodeLogTails,
  removeNodeDir,
  removeNodeNetwork,
  startRealNode,
  stopRealNode,
  type NodeNetwork,
  type RunningNode,
} from './node.js';

const execFileAsync = promisify(execFile);
const clusterDir = dirname(fileURLToPath(import.meta.url));

/** Names of the kwok nodes every cluster starts with. */
export const TEST_NODE_NAMES = ['kwok-node-0', 'kwok-node-1', 'kwok-node-2'] as const;

export interface ClusterOptions {
  /** kwokctl cluster name; also names the processes' pid and log files. */
  readonly name: string;
  /** Directory that holds the cluster (KWOK_WORKDIR); created if missing. */
  readonly workdir: string;
  /** Environment for the child processes (PATH, HOME, cache locations). */
  readonly env: NodeJS.ProcessEnv;
  /** Also start a real worker node (node.ts); costs about 15-30 s more and needs root. */
  readonly realNode?: boolean;
}

/** The real node of a running cluster. */
export interface RunningRealNode extends RunningNode {
  readonly network: NodeNetwork;
}

export interface RunningCluster {
  readonly name: string;
  readonly workdir: string;
  readonly binDir: string;
  readonly kubeconfigPath: string;
  /** Milliseconds from the start of kwokctl to every node being Ready. */
  readonly startMs: number;
  /** The inotify instance limit kwok's log follows run under (test/cluster/inotify.ts). */
  readonly inotify: InotifyLimit;
  /** Present when the cluster was started with `realNode`. */
  readonly realNode?: RunningRealNode;
}

/** The versions and image names build.sh pinned (test/cluster/versions.env). */
export function clusterVersions(): Record<string, string> {
  const entries = readFileSync(join(clusterDir, 'versions.env'), 'utf8')
    .split('\n')
    .map((line) => /^([A-Z0-9_]+)=(.*)$/.exec(line.trim()))
    .filter((match) => match !== null)
    .map((match) => [match[1] ?? '', match[2] ?? '']);
  return Object.fromEntries(entries) as Record<string, string>;
}

const nodeDir = (workdir: string) => join(workdir, 'node');
const networkFile = (workdir: string) => join(workdir, 'node-network.json');

/** Where build.sh's progress lines go: the caller's stderr unless a test listens itself. */
export type BuildProgress = (line: string) => void;

const toStderr: BuildProgress = (line) => {
  process.stderr.write(`${line}\n`);
};

/**
 * Builds (or finds cached) binaries and returns the directory that holds them. build.sh's own
 * lines (`build.sh: [i/N] part: building (about X min cold ...)`) reach `progress` as they come,
 * so a cold first build says what it is doing; the compilers' output is kept for a failure's
 * message only. The warm path ("cached") stays quiet.
 */
export function buildClusterBinaries(
  env: NodeJS.ProcessEnv,
  progress: BuildProgress = toStderr,
): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', [join(clusterDir, 'build.sh')], {
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    const stderrTail: string[] = [];
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    createInterface({ input: child.stderr, crlfDelay: Infinity }).on('line', (line) => {
      stderrTail.push(line);
      if (stderrTail.length > 40) stderrTail.shift();
      if (line.startsWith('build.sh: ') && line !== 'build.sh: test cluster binaries: cached') {
        progress(line);
      }
    });
    child.on('error', reject);
    child.on('close', (code, signal) => {
      if (code !== 0) {
        const how = code === null ? `was killed by ${String(signal)}` : `exited ${String(code)}`;
        reject(new Error(`test/cluster/build.sh ${how}:\n${stderrTail.join('\n')}`));
        return;
      }
      const binDir = stdout.trim().split('\n').at(-1);
      if (binDir === undefined || !existsSync(join(binDir, '.complete'))) {
        reject(
          new Error(`build.sh did not report a complete binary directory (got ${String(binDir)})`),
        );
        return;
      }
      resolve(binDir);
    });
  });
}

function kwokEnv(binDir: string, options: ClusterOptions): NodeJS.ProcessEnv {
  return {
    ...options.env,
    PATH: `${binDir}:${options.env['PATH'] ?? ''}`,
    KWOK_WORKDIR: options.workdir,
    KWOK_RUNTIME: 'binary',
    KWOK_KUBE_BINARY_PREFIX: binDir,
    KWOK_KUBECTL_BINARY: join(binDir, 'kubectl'),
    KWOK_ETCD_BINARY: join(binDir, 'etcd'),
    KWOK_CONTROLLER_BINARY: join(binDir, 'kwok'),
    KWOK_METRICS_SERVER_BINARY: join(binDir, 'metrics-server'),
  };
}

interface ComponentPatch {
  name: string;
  extraArgs: { key: string; value: string; override?: boolean }[];
}

/**
 * What the control plane needs beside a real kubelet: the relay address (the machine's end of the
 * node's veth) and the `kubernetes` Service IP in its certificate, kubelets dialled by InternalIP
 * with a client certificate the kubelet accepts.
 */
function realNodePatches(
  network: NodeNetwork,
  pki: string,
): {
  options: Record<string, unknown>;
  patches: ComponentPatch[];
} {
  return {
    options: { kubeApiserverCertSANs: [network.hostAddress, KUBERNETES_SERVICE_IP] },
    patches: [
      {
        name: 'kube-apiserver',
        extraArgs: [
          { key: 'kubelet-preferred-address-types', value: 'InternalIP' },
          { key: 'kubelet-client-certificate', value: join(pki, 'admin.crt') },
          { key: 'kubelet-client-key', value: join(pki, 'admin.key') },
        ],
      },
      {
        name: 'metrics-server',
        extraArgs: [
          // kwok nodes: InternalIP 127.0.0.1; the real node: its namespace's address.
          { key: 'kubelet-preferred-address-types', value: 'InternalIP,Hostname', override: true },
        ],
      },
    ],
  };
}

/** The `kubernetes` Service's ClusterIP: the first of the API server's default 10.0.0.0/24. */
export const KUBERNETES_SERVICE_IP = '10.0.0.1';

/**
 * The Stages kwok plays: kwokctl's defaults (node initialize and lease heartbeat; pod ready,
 * complete, delete; build.sh copies them from kwok's module) and the test Stages of stages.yaml.
 * Any Stage in a cluster's config replaces kwokctl's defaults, so both go in. The heartbeat is
 * the file's as it is: kwokctl would raise its delay to the node status update frequency, 10 s by
 * default, below the file's 600 s.
 */
async function kwokStages(binDir: string): Promise<Record<string, unknown>[]> {
  const defaults = join(binDir, 'kwok-default-stages');
  const files = [
    ...(await readdir(defaults)).sort().map((file) => join(defaults, file)),
    join(clusterDir, 'stages.yaml'),
  ];
  const stages: Record<string, unknown>[] = [];
  for (const file of files) {
    for (const doc of parseAllDocuments(await readFile(file, 'utf8'))) {
      const stage = doc.toJS() as Record<string, unknown> | null;
      if (stage?.['kind'] === 'Stage') stages.push(stage);
    }
  }
  return stages;
}

/** Writes the committed kwokctl.yaml with this machine's paths (and the real node's needs) added. */
async function writeKwokConfig(
  binDir: string,
  workdir: string,
  name: string,
  network: NodeNetwork | undefined,
): Promise<string> {
  const source = await readFile(join(clusterDir, 'kwokctl.yaml'), 'utf8');
  const docs = parseAllDocuments(source).map((doc) => doc.toJS() as Record<string, unknown>);
  const first = docs[0];
  if (first?.['kind'] !== 'KwokctlConfiguration') {
    throw new Error('test/cluster/kwokctl.yaml must start with a KwokctlConfiguration');
  }
  const options = (first['options'] ?? {}) as Record<string, unknown>;
  options['metricsServerManifests'] = [join(binDir, 'metrics-server-manifests')];
  if (network !== undefined) {
    const extra = realNodePatches(network, join(workdir, 'clusters', name, 'pki'));
    Object.assign(options, extra.options);
    const patches = (first['componentsPatches'] ?? []) as ComponentPatch[];
    for (const patch of extra.patches) {
      const existing = patches.find((p) => p.name === patch.name);
      if (existing === undefined) {
        patches.push(patch);
        continue;
      }
      const keys = new Set(patch.extraArgs.map((arg) => arg.key));
      existing.extraArgs = [
        ...existing.extraArgs.filter((arg) => !keys.has(arg.key)),
        ...patch.extraArgs,
      ];
    }
    first['componentsPatches'] = patches;
  }
  first['options'] = options;
  docs.push(...(await kwokStages(binDir)));
  const path = join(workdir, 'kwokctl.generated.yaml');
  await writeFile(path, docs.map((doc) => stringify(doc)).join('---\n'));
  return path;
}

function runLogged(command: string, args: string[], env: NodeJS.ProcessEnv, logPath: string) {
  return new Promise<void>((resolve, reject) => {
    const child = spawn(command, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    const chunks: Buffer[] = [];
    child.stdout.on('data', (chunk: Buffer) => chunks.push(chunk));
    child.stderr.on('data', (chunk: Buffer) => chunks.push(chunk));
    child.on('error', reject);
    child.on('close', (code) => {
      const output = Buffer.concat(chunks).toString('utf8');
      void writeFile(logPath, output).finally(() => {
        if (code === 0) resolve();
        else
          reject(
            new Error(`${command} ${args.join(' ')} exited ${String(code)}:\n${tail(output, 30)}`),
          );
      });
    });
  });
}

function tail(text: string, lines: number): string {
  return text.trimEnd().split('\n').slice(-lines).join('\n');
}

/** The last lines of every component log, for a failure message that says why. */
export function componentLogTails(workdir: string, name: string, lines = 15): string {
  const logDir = join(workdir, 'clusters', name, 'logs');
  if (!existsSync(logDir)) return '(no component logs)';
  return readdirSync(logDir)
    .map((file) => `--- ${file}\n${tail(readFileSync(join(logDir, file), 'utf8'), lines)}`)
    .join('\n');
}

function testNode(name: string): V1Node {
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: {
      name,
      annotations: {
        'kwok.x-k8s.io/node': 'fake',
        'node.alpha.kubernetes.io/ttl': '0',
        // metrics-server >= 0.7 scrapes this path on kwok's port instead of /metrics/resource.
        'metrics.k8s.io/resource-metrics-path': `/metrics/nodes/${name}/metrics/resource`,
      },
      labels: {
        type: 'kwok',
        'kubernetes.io/hostname': name,
        'kubernetes.io/os': 'linux',
        'kubernetes.io/arch': 'amd64',
      },
    },
    spec: {},
    status: {
      // Loopback only: the API server and metrics-server reach kwok here, and nothing else.
      addresses: [
        { type: 'InternalIP', address: '127.0.0.1' },
        { type: 'Hostname', address: 'localhost' },
      ],
      allocatable: { cpu: '32', memory: '256Gi', pods: '110' },
      capacity: { cpu: '32', memory: '256Gi', pods: '110' },
    },
  };
}

async function waitFor<T>(
  what: string,
  timeoutMs: number,
  probe: () => Promise<T | undefined>,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  while (Date.now() < deadline) {
    try {
      const value = await probe();
      if (value !== undefined) return value;
    } catch (err: unknown) {
      lastError = err;
    }
    await sleep(250);
  }
  const reason = lastError instanceof Error ? `: ${lastError.message}` : '';
  throw new Error(`timed out after ${String(timeoutMs)} ms waiting for ${what}${reason}`);
}

async function createReadyNodes(kubeconfigPath: string): Promise<void> {
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfigPath);
  const core = kc.makeApiClient(CoreV1Api);
  await waitFor('the default ServiceAccount', 60_000, async () => {
    await core.readNamespacedServiceAccount({ name: 'default', namespace: 'default' });
    return true;
  });
  for (const name of TEST_NODE_NAMES) {
    await core.createNode({ body: testNode(name) });
  }
  await waitFor('every kwok node to be Ready', 60_000, async () => {
    const nodes = await core.listNode({ labelSelector: 'type=kwok' });
    const ready = nodes.items.filter((node) =>
      node.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'),
    );
    return ready.length === TEST_NODE_NAMES.length ? true : undefined;
  });
}

/** Why metrics.k8s.io is not served within 90 s (its APIService not Available), or undefined. */
async function metricsApiProblem(kubeconfigPath: string): Promise<string | undefined> {
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfigPath);
  const registration = kc.makeApiClient(ApiregistrationV1Api);
  const name = 'v1beta1.metrics.k8s.io';
  let last = 'not read';
  try {
    await waitFor(`APIService ${name} to be Available`, 90_000, async () => {
      try {
        const service = await registration.readAPIService({ name });
        const available = service.status?.conditions?.find((c) => c.type === 'Available');
        last = `Available=${available?.status ?? 'absent'} (${available?.reason ?? ''})`;
        return available?.status === 'True' ? true : undefined;
      } catch (err: unknown) {
        // client-node's message holds every response header: the status code is enough here.
        const code = (err as { code?: unknown }).code;
        last = `read failed: HTTP ${typeof code === 'number' ? String(code) : '?'}`;
        return undefined;
      }
    });
    return undefined;
  } catch {
    return `metrics.k8s.io is not served 90 s after the cluster was ready (APIService ${name}: ${last})`;
  }
}

/** Starts a cluster and returns once the API server is ready and every node is Ready. */
export async function startCluster(options: ClusterOptions): Promise<RunningCluster> {
  const binDir = await buildClusterBinaries(options.env);
  if (options.realNode === true) {
    const missing = missingNodePrerequisites(binDir);
    if (missing.length > 0) {
      throw new Error(
        `the real node cannot start on this machine; missing:\n  - ${missing.join('\n  - ')}`,
      );
    }
  }
  await mkdir(options.workdir, { recursive: true });
  // Before kwok starts following logs; a limit that stays low is said once, plainly.
  const inotify = ensureInotifyInstances();
  if (inotify.problem !== undefined) process.stderr.write(`test cluster: ${inotify.problem}\n`);
  const env = kwokEnv(binDir, options);
  let network: NodeNetwork | undefined;
  if (options.realNode === true) {
    network = createNodeNetwork();
    writeFileSync(networkFile(options.workdir), JSON.stringify(network));
  }
  const configPath = await writeKwokConfig(binDir, options.workdir, options.name, network);
  const started = Date.now();
  try {
    const kubeconfigPath = join(options.workdir, 'clusters', options.name, 'kubeconfig.yaml');
    const create = async () => {
      await runLogged(
        join(binDir, 'kwokctl'),
        ['create', 'cluster', '--name', options.name, '-c', configPath, '--kubeconfig', ''].concat([
          '--enable',
          'metrics-server',
          '--wait',
          '3m',
        ]),
        env,
        join(options.workdir, 'kwokctl-create.log'),
      );
      await createReadyNodes(kubeconfigPath);
    };
    await create();
    // kwokctl reports the cluster ready without checking every component: with several clusters
    // starting at once on two cores (the test projects' setups), metrics-server can come up
    // before its API server listens, panic on "connection refused" and stay down, so
    // metrics.k8s.io is never served (seen in CI). Such a control plane is created once more.
    const metricsProblem = await metricsApiProblem(kubeconfigPath);
    if (metricsProblem !== undefined) {
      process.stderr.write(
        `test cluster ${options.name}: ${metricsProblem}; creating its control plane again\n${componentLogTails(options.workdir, options.name)}\n`,
      );
      await deleteControlPlane(binDir, options);
      await create();
      const again = await metricsApiProblem(kubeconfigPath);
      if (again !== undefined) throw new Error(again);
    }
    let realNode: RunningRealNode | undefined;
    if (network !== undefined) {
      const relayAddress = `${network.hostAddress}:${String(apiServerPort(kubeconfigPath))}`;
      const pki = join(options.workdir, 'clusters', options.name, 'pki');
      const versions = clusterVersions();
      const node = await startRealNode({
        network,
        dir: nodeDir(options.workdir),
        binDir,
        kubeconfigPath,
        caPath: join(pki, 'ca.crt'),
        writeKubeconfig: async (path, user, groups) => {
          const args = ['get', 'kubeconfig', '--name', options.name, '--user', user];
          // The node reaches the API server through the relay on its veth, not loopback.
          args.push('--host', relayAddress);
          for (const group of groups) args.push('--group', group);
          const { stdout } = await execFileAsync(join(binDir, 'kwokctl'), args, { env });
          await writeFile(path, stdout, { mode: 0o600 });
        },
        pauseImage: versions['PAUSE_IMAGE'] ?? '',
        images: [join(binDir, 'images', 'pause.tar'), join(binDir, 'images', 'busybox.tar')],
      });
      realNode = { ...node, network };
    }
    return {
      name: options.name,
      workdir: options.workdir,
      binDir,
      kubeconfigPath,
      startMs: Date.now() - started,
      inotify,
      ...(realNode === undefined ? {} : { realNode }),
    };
  } catch (err: unknown) {
    const logs =
      componentLogTails(options.workdir, options.name) +
      (network === undefined ? '' : `\n${nodeLogTails(nodeDir(options.workdir))}`);
    await stopCluster(options).catch(() => undefined);
    const message = err instanceof Error ? err.message : String(err);
    throw new Error(`test cluster failed to start: ${message}\n${logs}`, { cause: err });
  }
}

/** The real node's network if this cluster has one (read back from its work directory). */
function savedNetwork(workdir: string): NodeNetwork | undefined {
  try {
    return JSON.parse(readFileSync(networkFile(workdir), 'utf8')) as NodeNetwork;
  } catch {
    return undefined;
  }
}

/**
 * Kills every process recorded in the cluster's pid files and removes the real node (the
 * synchronous last resort, also run from a process 'exit' handler).
 */
export function killClusterProcesses(workdir: string, name: string): void {
  const network = savedNetwork(workdir);
  if (network !== undefined) {
    stopRealNode(nodeDir(workdir), network);
    removeNodeNetwork(network);
  }
  killControlPlaneProcesses(workdir, name);
}

function killControlPlaneProcesses(workdir: string, name: string): void {
  const pidDir = join(workdir, 'clusters', name, 'pids');
  if (!existsSync(pidDir)) return;
  for (const file of readdirSync(pidDir)) {
    const pid = Number.parseInt(readFileSync(join(pidDir, file), 'utf8').trim(), 10);
    if (!Number.isInteger(pid) || pid <= 1) continue;
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // Already gone: exactly what teardown wants.
    }
  }
}

/** Stops every process the cluster started and removes its work directory. */
export async function stopCluster(options: ClusterOptions): Promise<void> {
  // The real node first: its kubelet would report to a control plane that is gone.
  const network = savedNetwork(options.workdir);
  if (network !== undefined) {
    stopRealNode(nodeDir(options.workdir), network);
    await removeNodeDir(nodeDir(options.workdir));
  }
  const binDir = await buildClusterBinaries(options.env).catch(() => undefined);
  if (binDir !== undefined) await deleteControlPlane(binDir, options);
  killClusterProcesses(options.workdir, options.name);
  await rm(options.workdir, { recursive: true, force: true });
}

/** `kwokctl delete cluster`, then every process its pid files name (the real node is left). */
async function deleteControlPlane(binDir: string, options: ClusterOptions): Promise<void> {
  if (existsSync(join(options.workdir, 'clusters', options.name))) {
    await runLogged(
      join(binDir, 'kwokctl'),
      // An empty --kubeconfig is refused on delete; point it at a file of our own so the user's
      // ~/.kube/config is never touched.
      [
        'delete',
        'cluster',
        '--name',
        options.name,
        '--kubeconfig',
        join(options.workdir, 'unused'),
      ],
      kwokEnv(binDir, options),
      join(options.workdir, 'kwokctl-delete.log'),
    ).catch(() => undefined);
  }
  killControlPlaneProcesses(options.workdir, options.name);
}
