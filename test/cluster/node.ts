// The real worker node of the test cluster: containerd 2.x with its CRI plugin, Debian's runc, the
// CNI bridge and host-local plugins, a kubelet and kube-proxy (iptables) of the control plane's
// version, all built by build.sh. Everything runs in a network namespace of its own, joined to the
// machine by one veth pair the run creates:
//
//   machine (root namespace)                 node namespace
//   hostAddress  <------- veth ------->      nodeAddress (kubelet, kube-proxy, containerd)
//   (API server, etcd, kwok bind here)       cni0 bridge -> pods on podCidr
//
// The node namespace has no default route, so nothing a pod sends can leave the machine; kube-proxy's
// iptables rules live in that namespace only, so two runs never share a chain. Stopping kills every
// process, unmounts everything under the node's directory, deletes the namespace (which takes the
// veths, the bridge and the iptables rules with it), removes the node's cgroups and restores the
// kernel settings the kubelet changes.
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  rmSync,
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  writeFileSync,
} from 'node:fs';
import { rm } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { CoreV1Api, DiscoveryV1Api, KubeConfig, type V1Node } from '@kubernetes/client-node';
import { stringify } from 'yaml';

/** The real node's name; kwok's nodes are kwok-node-N. */
export const REAL_NODE_NAME = 'real-node-0';
/** Label on the real node, for node selectors. */
export const REAL_NODE_LABEL = 'kubexa.test/real-node';
/** NoSchedule taint on the real node: only pods that tolerate it land there. */
export const REAL_NODE_TAINT = 'kubexa.test/real-node';

/** Sysctls the kubelet sets on start (protectKernelDefaults=false); restored at stop. */
const KUBELET_SYSCTLS = ['kernel/panic', 'kernel/panic_on_oops', 'vm/overcommit_memory'] as const;
const KUBELET_PORT = 10250;
const KUBELET_FIXED_DIR = '/var/lib/kubelet';

/** Addresses of one run's node network; chosen before the control plane starts. */
export interface NodeNetwork {
  readonly id: string;
  readonly netns: string;
  /** On the machine's side of the veth: the API server binds and advertises here. */
  readonly hostAddress: string;
  /** The node's InternalIP, inside the node namespace. */
  readonly nodeAddress: string;
  readonly podCidr: string;
  readonly hostVeth: string;
}

export interface RealNodeOptions {
  readonly network: NodeNetwork;
  /** The node's own directory (state, logs, pid files), under the cluster's workdir. */
  readonly dir: string;
  readonly binDir: string;
  readonly kubeconfigPath: string;
  /** The cluster's CA certificate (client certificates and the kubelet's clients). */
  readonly caPath: string;
  /** Writes a kubeconfig whose client certificate names this user and groups. */
  readonly writeKubeconfig: (path: string, user: string, groups: string[]) => Promise<void>;
  readonly pauseImage: string;
  readonly images: readonly string[];
}

export interface RunningNode {
  readonly name: string;
  readonly address: string;
  /** Milliseconds from starting containerd to the node being Ready. */
  readonly startMs: number;
  /** The kubelet's PID on this machine (a host process a hostPID pod can nsenter into). */
  readonly kubeletPid: number;
  /** containerd's socket: `ctr --address <it> -n k8s.io images import` adds images. */
  readonly containerdSocket: string;
}

function run(command: string, args: string[]): string {
  return execFileSync(command, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

function tryRun(command: string, args: string[]): void {
  try {
    run(command, args);
  } catch {
    // Teardown of something already gone.
  }
}

function onPath(command: string): boolean {
  try {
    run('/bin/sh', ['-c', `command -v ${command}`]);
    return true;
  } catch {
    return false;
  }
}

/**
 * What this machine lacks to run the real node, each with its fix; empty when it can.
 * The node is never skipped: a non-empty list fails the run with it.
 */
export function missingNodePrerequisites(binDir: string): string[] {
  const missing: string[] = [];
  if (process.getuid?.() !== 0) {
    missing.push('root (network namespaces, mounts and cgroups): run the tests as root');
  }
  for (const [command, pkg] of [
    ['ip', 'iproute2'],
    ['nsenter', 'util-linux'],
    ['runc', 'runc'],
    ['iptables', 'iptables'],
    ['iptables-restore', 'iptables'],
    ['mount', 'mount'],
  ] as const) {
    if (!onPath(command)) missing.push(`${command} (apt-get install ${pkg})`);
  }
  const filesystems = existsSync('/proc/filesystems')
    ? readFileSync('/proc/filesystems', 'utf8')
    : '';
  if (!/\boverlay\b/.test(filesystems)) {
    missing.push('the overlay filesystem (modprobe overlay; containerd snapshots need it)');
  }
  const cgroupV1 = existsSync('/sys/fs/cgroup/memory/memory.limit_in_bytes');
  const cgroupV2 = existsSync('/sys/fs/cgroup/cgroup.controllers');
  if (!cgroupV1 && !cgroupV2) {
    missing.push('cgroups (mount cgroup v1 controllers or cgroup2 at /sys/fs/cgroup)');
  }
  for (const file of [
    'kubelet',
    'kube-proxy',
    'containerd',
    'containerd-shim-runc-v2',
    'ctr',
    'cni/bridge',
    'cni/host-local',
    'cni/loopback',
    'images/pause.tar',
    'images/busybox.tar',
  ]) {
    if (!existsSync(join(binDir, file))) {
      missing.push(`${file} in ${binDir} (run npm run cluster:build)`);
    }
  }
  return missing;
}

function cgroupV1Hierarchies(): string[] {
  if (existsSync('/sys/fs/cgroup/cgroup.controllers')) return ['/sys/fs/cgroup'];
  return (
    readdirSync('/sys/fs/cgroup')
      .map((entry) => join('/sys/fs/cgroup', entry))
      // Every mounted hierarchy, the hybrid layout's cgroup2 "unified" one too (runc uses it).
      .filter((dir) => existsSync(join(dir, 'cgroup.procs')))
  );
}

/** The node's cgroup root in every hierarchy (the kubelet requires it to exist). */
function createCgroupRoot(root: string): void {
  for (const hierarchy of cgroupV1Hierarchies()) {
    const dir = join(hierarchy, root);
    mkdirSync(dir, { recursive: true });
    // A new v1 cpuset starts empty, and a cgroup without CPUs or memory nodes accepts no task.
    for (const file of ['cpuset.cpus', 'cpuset.mems']) {
      if (existsSync(join(dir, file)) && readFileSync(join(dir, file), 'utf8').trim() === '') {
        writeFileSync(join(dir, file), readFileSync(join(hierarchy, file), 'utf8'));
      }
    }
  }
}

function cgroupDirsDepthFirst(dir: string): string[] {
  if (!existsSync(dir)) return [];
  const children = readdirSync(dir, { withFileTypes: true })
    .filter((entry) => entry.isDirectory())
    .flatMap((entry) => cgroupDirsDepthFirst(join(dir, entry.name)));
  return [...children, dir];
}

function pidsInCgroupRoot(root: string): number[] {
  const pids = new Set<number>();
  for (const hierarchy of cgroupV1Hierarchies()) {
    for (const dir of cgroupDirsDepthFirst(join(hierarchy, root))) {
      try {
        for (const line of readFileSync(join(dir, 'cgroup.procs'), 'utf8').split('\n')) {
          const pid = Number.parseInt(line, 10);
          if (pid > 1) pids.add(pid);
        }
      } catch {
        // Removed meanwhile.
      }
    }
  }
  return [...pids];
}

function removeCgroupRoot(root: string): void {
  for (const hierarchy of cgroupV1Hierarchies()) {
    for (const dir of cgroupDirsDepthFirst(join(hierarchy, root))) {
      tryRun('rmdir', [dir]);
    }
  }
}

/** Processes whose command line mentions the node's directory (containerd's shims, runc). */
function pidsReferring(dir: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    const pid = Number.parseInt(entry, 10);
    if (!Number.isInteger(pid) || pid <= 1 || pid === process.pid) continue;
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes(dir)) pids.push(pid);
    } catch {
      // Exited meanwhile.
    }
  }
  return pids;
}

/**
 * Whether `pid` still runs. An exited process that is not reaped yet (a zombie: state Z in
 * /proc/<pid>/stat) answers kill(pid, 0) like a live one. The kubelet and containerd are children
 * of this process, reaped only by its event loop, which the synchronous wait in `terminate` blocks:
 * counted as alive they cost their whole grace period, 12 s in all, and the vitest fork's exit,
 * seen by the same loop only afterwards, was reported as "Timeout terminating forks worker".
 */
export function isProcessRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    const stat = readFileSync(`/proc/${String(pid)}/stat`, 'utf8');
    // "<pid> (<comm>) <state> ...": comm may hold spaces and parentheses, the state follows the last ')'.
    const state = stat.slice(stat.lastIndexOf(')') + 2).charAt(0);
    return state !== 'Z' && state !== 'X';
  } catch {
    return false;
  }
}

function killAll(pids: Iterable<number>, signal: NodeJS.Signals): void {
  for (const pid of pids) {
    try {
      process.kill(pid, signal);
    } catch {
      // Already gone.
    }
  }
}

/** Sends SIGTERM, waits up to `graceMs` (synchronously: teardown may run in an exit handler). */
function terminate(pids: number[], graceMs: number): void {
  killAll(pids, 'SIGTERM');
  const deadline = Date.now() + graceMs;
  while (pids.some(isProcessRunning) && Date.now() < deadline) {
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 50);
  }
  killAll(pids.filter(isProcessRunning), 'SIGKILL');
}

function mountsUnder(dir: string): string[] {
  return readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((line) => line.split(' ')[4] ?? '')
    .map((path) => path.replace(/\\040/g, ' '))
    .filter((path) => path === dir || path.startsWith(`${dir}/`))
    .sort((a, b) => b.length - a.length);
}

function readSysctl(key: string): string | undefined {
  try {
    return readFileSync(`/proc/sys/${key}`, 'utf8').trim();
  } catch {
    return undefined;
  }
}

function routesInUse(): string {
  return run('ip', ['-4', 'route', 'show', 'table', 'all']) + run('ip', ['-4', '-br', 'addr']);
}

/**
 * Creates the node's network namespace and the veth pair that joins it to the machine. Runs before
 * the control plane starts, because the API server binds to `hostAddress` and kwokctl puts every
 * local address into the API server's certificate.
 */
export function createNodeNetwork(): NodeNetwork {
  const used = routesInUse();
  for (let attempt = 0; attempt < 20; attempt++) {
    const bytes = randomBytes(3);
    const a = 200 + ((bytes[0] ?? 0) % 50);
    const b = bytes[1] ?? 0;
    if (used.includes(`10.${String(a)}.${String(b)}.`)) continue;
    const id = (bytes[2] ?? 0).toString(16).padStart(2, '0') + String(process.pid % 100000);
    const network: NodeNetwork = {
      id,
      netns: `kubexa-${id}`,
      hostAddress: `10.${String(a)}.${String(b)}.1`,
      nodeAddress: `10.${String(a)}.${String(b)}.2`,
      podCidr: `10.${String(a)}.${String(b)}.128/25`,
      hostVeth: `kx${id}h`.slice(0, 15),
    };
    const nodeVeth = `kx${id}n`.slice(0, 15);
    try {
      run('ip', ['netns', 'add', network.netns]);
      run('ip', ['link', 'add', network.hostVeth, 'type', 'veth', 'peer', 'name', nodeVeth]);
      run('ip', ['link', 'set', nodeVeth, 'netns', network.netns]);
      run('ip', ['addr', 'add', `${network.hostAddress}/30`, 'dev', network.hostVeth]);
      run('ip', ['link', 'set', network.hostVeth, 'up']);
      const inNs = (...args: string[]) => run('ip', ['netns', 'exec', network.netns, ...args]);
      inNs('ip', 'addr', 'add', `${network.nodeAddress}/30`, 'dev', nodeVeth);
      inNs('ip', 'link', 'set', nodeVeth, 'up');
      inNs('ip', 'link', 'set', 'lo', 'up');
      // Pods reach the API server through the node namespace: forward there, never beyond.
      inNs('sysctl', '-q', '-w', 'net.ipv4.ip_forward=1');
      // The API server answers pods (in-cluster clients) through the node.
      run('ip', [
        'route',
        'add',
        network.podCidr,
        'via',
        network.nodeAddress,
        'dev',
        network.hostVeth,
      ]);
      return network;
    } catch (err: unknown) {
      removeNodeNetwork(network);
      throw new Error(
        `cannot create the real node's network (namespace ${network.netns}, veth ${network.hostVeth}): ${errorText(err)}`,
        { cause: err },
      );
    }
  }
  throw new Error('no free 10.200-249.x.0/24 range for the real node network');
}

/** Deletes the namespace (with the veth pair, the pods' bridge and its iptables rules). */
export function removeNodeNetwork(network: NodeNetwork): void {
  tryRun('ip', ['link', 'del', network.hostVeth]);
  tryRun('ip', ['netns', 'del', network.netns]);
}

function errorText(err: unknown): string {
  if (err instanceof Error) {
    const stderr = (err as { stderr?: unknown }).stderr;
    return typeof stderr === 'string' && stderr.trim() !== '' ? stderr.trim() : err.message;
  }
  return String(err);
}

function tailOf(path: string, lines: number): string {
  if (!existsSync(path)) return '(no log)';
  return readFileSync(path, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
}

/** The last lines of the node's component logs, for a failure that says why. */
export function nodeLogTails(dir: string, lines = 20): string {
  const logDir = join(dir, 'logs');
  if (!existsSync(logDir)) return '(no node logs)';
  return readdirSync(logDir)
    .map((file) => `--- node/${file}\n${tailOf(join(logDir, file), lines)}`)
    .join('\n');
}

interface NodeLayout {
  readonly dir: string;
  readonly logs: string;
  readonly pids: string;
  readonly containerdSocket: string;
  readonly cgroupRoot: string;
  readonly sysctlsFile: string;
  readonly containerLogLinks: string;
}

function layout(dir: string, network: NodeNetwork): NodeLayout {
  return {
    dir,
    logs: join(dir, 'logs'),
    pids: join(dir, 'pids'),
    containerdSocket: join(dir, 'containerd', 'containerd.sock'),
    cgroupRoot: `/kubexa-${network.id}`,
    sysctlsFile: join(dir, 'sysctls.json'),
    containerLogLinks: '/var/log/containers',
  };
}

interface Launch {
  readonly name: string;
  readonly command: string;
  readonly args: string[];
  readonly env: NodeJS.ProcessEnv;
}

/** Starts a process in the node's network namespace (only: it shares the machine's mounts). */
function startInNamespace(paths: NodeLayout, network: NodeNetwork, launch: Launch): number {
  const log = openSync(join(paths.logs, `${launch.name}.log`), 'a');
  try {
    const child = spawn(
      'nsenter',
      [`--net=/run/netns/${network.netns}`, '--', launch.command, ...launch.args],
      { detached: true, stdio: ['ignore', log, log], env: launch.env },
    );
    if (child.pid === undefined) throw new Error(`cannot start ${launch.name}`);
    child.unref();
    writeFileSync(join(paths.pids, `${launch.name}.pid`), String(child.pid));
    return child.pid;
  } finally {
    closeSync(log);
  }
}

function containerdConfig(paths: NodeLayout, options: RealNodeOptions): string {
  const d = paths.dir;
  // The CRI plugin's settings; everything lives under the node's directory.
  return `version = 3
root = ${JSON.stringify(join(d, 'containerd', 'root'))}
state = ${JSON.stringify(join(d, 'containerd', 'state'))}
disabled_plugins = ["io.containerd.nri.v1.nri", "io.containerd.internal.v1.tracing", "io.containerd.snapshotter.v1.blockfile"]

[grpc]
  address = ${JSON.stringify(paths.containerdSocket)}

[ttrpc]
  address = ${JSON.stringify(`${paths.containerdSocket}.ttrpc`)}

[plugins.'io.containerd.internal.v1.opt']
  path = ${JSON.stringify(join(d, 'containerd', 'opt'))}

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = ${JSON.stringify(options.pauseImage)}

[plugins.'io.containerd.cri.v1.runtime']
  enable_selinux = false
  # These machines withhold CAP_SYS_RESOURCE: a lower oom_score_adj than containerd's own is
  # refused, and runc then fails every sandbox with "can't get final child's PID from pipe".
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = "runc"
        Root = ${JSON.stringify(join(d, 'runc'))}
        SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = [${JSON.stringify(join(options.binDir, 'cni'))}]
    conf_dir = ${JSON.stringify(join(d, 'cni', 'net.d'))}

[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
`;
}

function cniConfig(paths: NodeLayout, network: NodeNetwork): string {
  return JSON.stringify({
    cniVersion: '1.0.0',
    name: 'kubexa-test',
    plugins: [
      {
        type: 'bridge',
        bridge: 'cni0',
        isGateway: true,
        ipMasq: false,
        hairpinMode: true,
        ipam: {
          type: 'host-local',
          ranges: [[{ subnet: network.podCidr }]],
          routes: [{ dst: '0.0.0.0/0' }],
          dataDir: join(paths.dir, 'cni', 'ipam'),
        },
      },
      { type: 'portmap', capabilities: { portMappings: true } },
    ],
  });
}

function kubeletConfig(paths: NodeLayout, options: RealNodeOptions): string {
  return stringify({
    apiVersion: 'kubelet.config.k8s.io/v1beta1',
    kind: 'KubeletConfiguration',
    address: options.network.nodeAddress,
    port: KUBELET_PORT,
    readOnlyPort: 0,
    healthzBindAddress: '127.0.0.1',
    healthzPort: 10248,
    authentication: {
      anonymous: { enabled: false },
      webhook: { enabled: true },
      x509: { clientCAFile: options.caPath },
    },
    authorization: { mode: 'Webhook' },
    cgroupDriver: 'cgroupfs',
    cgroupRoot: paths.cgroupRoot,
    // These machines run cgroup v1; kubelets of 1.35 and later refuse it unless told.
    failCgroupV1: false,
    failSwapOn: false,
    containerRuntimeEndpoint: `unix://${paths.containerdSocket}`,
    podLogsDir: join(paths.dir, 'pod-logs'),
    resolvConf: join(paths.dir, 'resolv.conf'),
    clusterDomain: 'cluster.local',
    // Nothing may be evicted or garbage-collected because of the machine's disk during a run.
    evictionHard: {
      'memory.available': '100Mi',
      'nodefs.available': '1%',
      'imagefs.available': '1%',
    },
    imageGCHighThresholdPercent: 100,
    imageGCLowThresholdPercent: 99,
    serializeImagePulls: false,
    maxPods: 30,
    registerWithTaints: [{ key: REAL_NODE_TAINT, value: 'true', effect: 'NoSchedule' }],
    rotateCertificates: false,
    enableServer: true,
  });
}

function kubeProxyConfig(options: RealNodeOptions, kubeconfig: string): string {
  return stringify({
    apiVersion: 'kubeproxy.config.k8s.io/v1alpha1',
    kind: 'KubeProxyConfiguration',
    mode: 'iptables',
    hostnameOverride: REAL_NODE_NAME,
    clusterCIDR: options.network.podCidr,
    clientConnection: { kubeconfig },
    bindAddress: options.network.nodeAddress,
    healthzBindAddress: '127.0.0.1:10256',
    metricsBindAddress: '127.0.0.1:10249',
    // conntrack sysctls are machine-wide: leave them as they are.
    conntrack: {
      maxPerCore: 0,
      min: 0,
      tcpEstablishedTimeout: '0s',
      tcpCloseWaitTimeout: '0s',
    },
    iptables: { localhostNodePorts: false },
  });
}

/** A component died: waiting longer cannot help. */
class ProcessExited extends Error {}

async function waitFor<T>(
  what: string,
  timeoutMs: number,
  probe: () => Promise<T | undefined> | T | undefined,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  while (Date.now() < deadline) {
    try {
      const value = await probe();
      if (value !== undefined) return value;
    } catch (err: unknown) {
      if (err instanceof ProcessExited) throw err;
      lastError = err;
    }
    await sleep(250);
  }
  const reason = lastError === undefined ? '' : `: ${errorText(lastError)}`;
  throw new Error(`timed out after ${String(timeoutMs)} ms waiting for ${what}${reason}`);
}

/** Throws (waiting longer cannot help) when one of the node's processes has exited. */
function failIfExited(paths: NodeLayout, names: readonly string[]): void {
  for (const name of names) {
    const pid = Number.parseInt(readFileSync(join(paths.pids, `${name}.pid`), 'utf8'), 10);
    if (!isProcessRunning(pid)) {
      throw new ProcessExited(`${name} exited:\n${tailOf(join(paths.logs, `${name}.log`), 25)}`);
    }
  }
}

/** A node's conditions on one line each: `Ready=False KubeletNotReady: <message>`. */
function conditionLines(node: V1Node): string {
  const conditions = node.status?.conditions ?? [];
  if (conditions.length === 0) return '  (no conditions reported)';
  return conditions
    .map((c) => `  ${c.type}=${c.status} ${c.reason ?? ''}: ${c.message ?? ''}`.trimEnd())
    .join('\n');
}

/**
 * Waits for the node to register and be Ready; `checkAlive` throws when a component has exited. A
 * timeout names what the node last reported (its conditions), or that it never registered; the
 * cluster start adds every log tail (componentLogTails, nodeLogTails).
 */
export async function waitForNodeReady(
  core: CoreV1Api,
  name: string,
  timeoutMs: number,
  checkAlive: () => void,
): Promise<void> {
  await waitFor(`node ${name} to be Ready`, timeoutMs, async () => {
    checkAlive();
    const node = await core.readNode({ name }).catch((err: unknown) => {
      if ((err as { code?: unknown }).code === 404) {
        throw new Error(`node ${name} never registered (no Node object)`);
      }
      throw err;
    });
    const ready = node.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True');
    if (ready !== true)
      throw new Error(`node ${name} is not Ready; its conditions:\n${conditionLines(node)}`);
    return true;
  });
}

/** The API server's port, from the cluster's (loopback) kubeconfig. */
export function apiServerPort(kubeconfigPath: string): number {
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfigPath);
  const server = kc.getCurrentCluster()?.server ?? '';
  return Number.parseInt(new URL(server).port || '443', 10);
}

/**
 * The `kubernetes` Service's endpoints. The control plane runs with endpoint-reconciler-type=none
 * (kwok publishes loopback otherwise), so the harness publishes the bridge address itself, which is
 * where kube-proxy sends in-cluster clients.
 */
async function publishApiServerEndpoints(kc: KubeConfig, options: RealNodeOptions): Promise<void> {
  const discovery = kc.makeApiClient(DiscoveryV1Api);
  await discovery.createNamespacedEndpointSlice({
    namespace: 'default',
    body: {
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      metadata: {
        name: 'kubernetes',
        labels: {
          'kubernetes.io/service-name': 'kubernetes',
          'endpointslice.kubernetes.io/managed-by': 'kubexa-test-harness',
        },
      },
      addressType: 'IPv4',
      endpoints: [{ addresses: [options.network.hostAddress], conditions: { ready: true } }],
      ports: [{ name: 'https', port: apiServerPort(options.kubeconfigPath), protocol: 'TCP' }],
    },
  });
}

/** Starts containerd, imports the images, starts the kubelet and kube-proxy; waits for Ready. */
export async function startRealNode(options: RealNodeOptions): Promise<RunningNode> {
  const missing = missingNodePrerequisites(options.binDir);
  if (missing.length > 0) {
    throw new Error(
      `the real node cannot start on this machine; missing:\n  - ${missing.join('\n  - ')}`,
    );
  }
  const paths = layout(options.dir, options.network);
  for (const dir of [
    paths.logs,
    paths.pids,
    join(paths.dir, 'cni', 'net.d'),
    join(paths.dir, 'containerd'),
  ]) {
    mkdirSync(dir, { recursive: true });
  }
  const started = Date.now();
  const sysctls = Object.fromEntries(KUBELET_SYSCTLS.map((key) => [key, readSysctl(key)]));
  writeFileSync(paths.sysctlsFile, JSON.stringify(sysctls));
  writeFileSync(join(paths.dir, 'resolv.conf'), '');
  // The kubelet's device plugin directory is fixed under /var/lib/kubelet whatever --root-dir says.
  if (!existsSync(KUBELET_FIXED_DIR)) {
    writeFileSync(join(paths.dir, 'created-kubelet-dir'), KUBELET_FIXED_DIR);
  }
  if (!existsSync(paths.containerLogLinks)) {
    mkdirSync(paths.containerLogLinks, { recursive: true });
    writeFileSync(join(paths.dir, 'created-container-log-dir'), paths.containerLogLinks);
  }
  createCgroupRoot(paths.cgroupRoot);

  const env: NodeJS.ProcessEnv = {
    ...process.env,
    PATH: `${options.binDir}:${process.env['PATH'] ?? '/usr/sbin:/usr/bin:/sbin:/bin'}`,
  };
  writeFileSync(join(paths.dir, 'containerd.toml'), containerdConfig(paths, options));
  writeFileSync(
    join(paths.dir, 'cni', 'net.d', '10-kubexa.conflist'),
    cniConfig(paths, options.network),
  );
  startInNamespace(paths, options.network, {
    name: 'containerd',
    command: join(options.binDir, 'containerd'),
    args: ['--config', join(paths.dir, 'containerd.toml')],
    env,
  });
  const ctr = (...args: string[]) =>
    run(join(options.binDir, 'ctr'), [
      '--address',
      paths.containerdSocket,
      '--namespace',
      'k8s.io',
      ...args,
    ]);
  await waitFor('containerd to answer', 30_000, () => {
    failIfExited(paths, ['containerd']);
    ctr('version');
    return true;
  });
  for (const image of options.images) ctr('images', 'import', '--local', image);

  // The API server listens on loopback only; the node namespace reaches it through this relay.
  const port = apiServerPort(options.kubeconfigPath);
  const relayLog = openSync(join(paths.logs, 'relay.log'), 'a');
  const relay = spawn(
    process.execPath,
    [
      join(import.meta.dirname, 'relay.mjs'),
      options.network.hostAddress,
      String(port),
      '127.0.0.1',
      String(port),
      paths.dir,
    ],
    { detached: true, stdio: ['ignore', relayLog, relayLog] },
  );
  closeSync(relayLog);
  relay.unref();
  writeFileSync(join(paths.pids, 'relay.pid'), String(relay.pid));

  const kubeletKubeconfig = join(paths.dir, 'kubelet.kubeconfig');
  await options.writeKubeconfig(kubeletKubeconfig, `system:node:${REAL_NODE_NAME}`, [
    'system:nodes',
  ]);
  const proxyKubeconfig = join(paths.dir, 'kube-proxy.kubeconfig');
  await options.writeKubeconfig(proxyKubeconfig, 'system:kube-proxy', []);

  writeFileSync(join(paths.dir, 'kubelet.yaml'), kubeletConfig(paths, options));
  const kubeletPid = startInNamespace(paths, options.network, {
    name: 'kubelet',
    command: join(options.binDir, 'kubelet'),
    args: [
      '--config',
      join(paths.dir, 'kubelet.yaml'),
      '--kubeconfig',
      kubeletKubeconfig,
      '--root-dir',
      join(paths.dir, 'kubelet'),
      '--cert-dir',
      join(paths.dir, 'kubelet', 'pki'),
      '--hostname-override',
      REAL_NODE_NAME,
      '--node-ip',
      options.network.nodeAddress,
      '--node-labels',
      `${REAL_NODE_LABEL}=true`,
      '--v=2',
    ],
    env,
  });

  const kc = new KubeConfig();
  kc.loadFromFile(options.kubeconfigPath);
  await publishApiServerEndpoints(kc, options);
  writeFileSync(join(paths.dir, 'kube-proxy.yaml'), kubeProxyConfig(options, proxyKubeconfig));
  startInNamespace(paths, options.network, {
    name: 'kube-proxy',
    command: join(options.binDir, 'kube-proxy'),
    args: ['--config', join(paths.dir, 'kube-proxy.yaml'), '--v=2'],
    env,
  });

  await waitForNodeReady(kc.makeApiClient(CoreV1Api), REAL_NODE_NAME, 120_000, () => {
    failIfExited(paths, ['relay', 'containerd', 'kubelet', 'kube-proxy']);
  });
  return {
    name: REAL_NODE_NAME,
    address: options.network.nodeAddress,
    startMs: Date.now() - started,
    kubeletPid,
    containerdSocket: paths.containerdSocket,
  };
}

/**
 * Stops the node and removes every trace of it: processes (its own, the containers', the shims'),
 * mounts, the network namespace with its veths and iptables rules, cgroups, the kubelet's
 * container log links, and the kernel settings the kubelet changed. Synchronous, so that it also
 * works from a process 'exit' handler; safe to call twice.
 */
export function stopRealNode(dir: string, network: NodeNetwork): void {
  const paths = layout(dir, network);
  const pidOf = (name: string) => {
    try {
      return Number.parseInt(readFileSync(join(paths.pids, `${name}.pid`), 'utf8'), 10);
    } catch {
      return Number.NaN;
    }
  };
  const own = (names: string[]) =>
    names.map(pidOf).filter((pid) => Number.isInteger(pid) && pid > 1);
  terminate(own(['kube-proxy', 'kubelet']), 5_000);
  // The containers, then the shims that outlive containerd, then containerd.
  killAll(pidsInCgroupRoot(paths.cgroupRoot), 'SIGKILL');
  terminate(
    pidsReferring(dir).filter((pid) => !own(['containerd']).includes(pid)),
    2_000,
  );
  terminate(own(['containerd', 'relay']), 5_000);
  killAll(pidsReferring(dir), 'SIGKILL');
  for (const mount of mountsUnder(dir)) tryRun('umount', ['-l', mount]);
  removeNodeNetwork(network);
  removeCgroupRoot(paths.cgroupRoot);
  if (existsSync(paths.containerLogLinks)) {
    for (const link of readdirSync(paths.containerLogLinks)) {
      const path = join(paths.containerLogLinks, link);
      try {
        if (run('readlink', [path]).startsWith(dir)) tryRun('rm', ['-f', path]);
      } catch {
        // Not a link.
      }
    }
    if (existsSync(join(dir, 'created-container-log-dir')))
      tryRun('rmdir', [paths.containerLogLinks]);
  }
  if (existsSync(join(dir, 'created-kubelet-dir'))) {
    rmSync(KUBELET_FIXED_DIR, { recursive: true, force: true });
  }
  if (existsSync(paths.sysctlsFile)) {
    const saved = JSON.parse(readFileSync(paths.sysctlsFile, 'utf8')) as Record<
      string,
      string | null
    >;
    for (const [key, value] of Object.entries(saved)) {
      if (typeof value === 'string' && readSysctl(key) !== value) {
        try {
          writeFileSync(`/proc/sys/${key}`, value);
        } catch {
          // Read-only here: nothing was changed either.
        }
      }
    }
  }
}

/** Removes the node's directory once `stopRealNode` has unmounted everything under it. */
export async function removeNodeDir(dir: string): Promise<void> {
  if (mountsUnder(dir).length > 0) {
    throw new Error(`still mounted under ${dir}: ${mountsUnder(dir).join(', ')}`);
  }
  await rm(dir, { recursive: true, force: true });
}

/** This machine's hostname, which a host-namespace command on the node must print. */
export function machineHostname(): string {
  return hostname();
}
