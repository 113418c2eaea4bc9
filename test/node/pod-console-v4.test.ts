// The v4 fallback of the exec connection, on the real node: a TLS-terminating proxy between the
// executor and the API server takes `v5.channel.k8s.io` out of the executor's offer, so the API
// server negotiates `v4.channel.k8s.io`, as a server without v5 would. v4 has no CLOSE channel
// (stdin cannot be half-closed), so ending a session must not rely on it: the process is ended by
// the second exec (marked-processes.ts), with or without a TTY, and its real exit status still
// arrives before the connection is closed. Closing the connection alone ends nothing, not even a
// process in a terminal: the TTY close test failed on v5 and v4 before TTY commands were marked. A control through the same proxy
// without the filter shows the API server picks v5 when offered, so the v4 result is the filter's.
import { CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { ConsoleEndReason } from '../../proto/index.js';
import { openPodExec } from '../../executor/sessions/pod-exec-socket.js';
import {
  generateCommandKeyPair,
  type CommandKeyPair,
} from '../../shared/signed-command/sign-command.js';
import { clusterVersions } from '../cluster/cluster.js';
import { REAL_NODE_LABEL, REAL_NODE_TAINT } from '../cluster/node.js';
import {
  serviceAccountIdentity,
  startTestExecutor,
  type RunningExecutor,
} from '../helpers/console-executor.js';
import { ConsoleStreamClient, signConsoleOpen } from '../helpers/console-stream.js';
import { startExecProtocolProxy, type ExecProtocolProxy } from '../helpers/exec-protocol-proxy.js';
import {
  createTestNamespace,
  eventually,
  loadKubeConfig,
  type TestNamespace,
} from '../helpers/kube.js';

const kubeconfigPath = inject('kubeconfigPath');
const admin = loadKubeConfig(kubeconfigPath);
const core = admin.makeApiClient(CoreV1Api);
const busybox = clusterVersions()['BUSYBOX_IMAGE'] ?? '';
const platform: CommandKeyPair = generateCommandKeyPair();
const SIGNER = { key: platform, keyId: 'platform-test' };
const V4 = 'v4.channel.k8s.io';
const V5 = 'v5.channel.k8s.io';

let ns: TestNamespace;
/** Drops v5 from the executor's offer. */
let v4Proxy: ExecProtocolProxy;
/** Passes the offer untouched (the control). */
let plainProxy: ExecProtocolProxy;
let v4Executor: RunningExecutor;
let v5Executor: RunningExecutor;
let counter = 0;

function open(
  executor: RunningExecutor,
  options: { command?: string[]; tty?: boolean; cols?: number; rows?: number } = {},
): ConsoleStreamClient {
  counter += 1;
  const requestId = `v4-req-${String(counter)}`;
  const target = { namespace: ns.name, pod: 'console-v4' };
  const stream = new ConsoleStreamClient(executor.client);
  stream.send({
    input: {
      $case: 'open',
      value: {
        requestId,
        target: {
          kind: 'pod',
          namespace: ns.name,
          name: 'console-v4',
          container: '',
          resource: '',
        },
        command: options.command ?? [],
        tty: options.tty ?? false,
        ...(options.cols === undefined
          ? {}
          : { size: { cols: options.cols, rows: options.rows ?? 24 } }),
        commandSignature: { jws: signConsoleOpen(SIGNER, requestId, target) },
      },
    },
  });
  return stream;
}

/** The exec upgrades the proxy saw since `from` (the pod read is a plain GET, not recorded). */
function execUpgrades(proxy: ExecProtocolProxy, from: number) {
  return proxy.upgrades.slice(from).filter((u) => u.path.includes('/exec?'));
}

/** `ps` in the pod through the admin's own exec (not through the proxy). */
async function processesInPod(): Promise<string> {
  let text = '';
  await new Promise<void>((resolve, reject) => {
    openPodExec(
      admin,
      { namespace: ns.name, pod: 'console-v4', container: 'main', command: ['ps'], tty: false },
      {
        onOutput: (_stream, data) => {
          text += data.toString('utf8');
        },
        onEnd: () => {
          resolve();
        },
      },
    ).catch(reject);
  });
  return text;
}

async function expectProcessGone(command: string): Promise<void> {
  await eventually(
    `no "${command}" left in the pod`,
    async () => ((await processesInPod()).includes(command) ? undefined : true),
    { timeoutMs: 15_000, intervalMs: 250 },
  );
}

async function expectProcessRunning(command: string): Promise<void> {
  await eventually(
    `"${command}" running in the pod`,
    async () => ((await processesInPod()).includes(command) ? true : undefined),
    { timeoutMs: 20_000, intervalMs: 250 },
  );
}

beforeAll(async () => {
  ns = await createTestNamespace(admin, 'pod-console-v4');
  const pod: V1Pod = {
    metadata: { name: 'console-v4', namespace: ns.name },
    spec: {
      nodeSelector: { [REAL_NODE_LABEL]: 'true' },
      tolerations: [{ key: REAL_NODE_TAINT, operator: 'Exists', effect: 'NoSchedule' }],
      restartPolicy: 'Never',
      terminationGracePeriodSeconds: 1,
      containers: [
        { name: 'main', image: busybox, imagePullPolicy: 'Never', command: ['sleep', '3600'] },
      ],
    },
  };
  await core.createNamespacedPod({ namespace: ns.name, body: pod });
  const identity = await serviceAccountIdentity(admin, ns.name, 'executor', true);
  const token = identity.getCurrentUser()?.token ?? '';
  v4Proxy = await startExecProtocolProxy(admin, { drop: [V5] });
  plainProxy = await startExecProtocolProxy(admin, { drop: [] });
  const commandKey = { id: SIGNER.keyId, publicKeyPem: platform.publicKeyPem };
  v4Executor = await startTestExecutor({
    kube: v4Proxy.kubeConfigFor(token),
    namespace: ns.name,
    commandKey,
  });
  v5Executor = await startTestExecutor({
    kube: plainProxy.kubeConfigFor(token),
    namespace: ns.name,
    commandKey,
  });
  await eventually(
    'pod console-v4 running',
    async () => {
      const found = await core.readNamespacedPod({ name: 'console-v4', namespace: ns.name });
      return found.status?.phase === 'Running' ? true : undefined;
    },
    { timeoutMs: 90_000, intervalMs: 500 },
  );
}, 180_000);

afterAll(async () => {
  await v4Executor.close();
  await v5Executor.close();
  await v4Proxy.close();
  await plainProxy.close();
  await ns.delete();
});

describe('pods/exec on v4.channel.k8s.io (the server does not offer v5)', () => {
  it('control: offered untouched, the API server picks v5', async () => {
    const from = plainProxy.upgrades.length;
    const probe = open(v5Executor, { command: ['echo', 'on-v5'] });
    await probe.until('exit', () => probe.exit !== undefined);
    expect(probe.output()).toBe('on-v5\n');
    const seen = execUpgrades(plainProxy, from);
    expect(seen.length).toBeGreaterThan(0);
    for (const upgrade of seen) {
      expect(upgrade.offered).toEqual([V5, V4]);
      expect(upgrade).toMatchObject({ status: 101, negotiated: V5 });
    }
  });

  it('a TTY sh: stdin, stdout, stty size after a resize and the exit status, negotiated as v4', async () => {
    const from = v4Proxy.upgrades.length;
    const shell = open(v4Executor, { tty: true, cols: 100, rows: 30 });
    await shell.until('opened', () => shell.opened !== undefined);
    shell.stdin('echo size=$(stty size)\r');
    await shell.waitForOutput(/size=30 100/);
    shell.resize(120, 50);
    await eventually(
      'the new size inside the container',
      async () => {
        shell.stdin('echo resized=$(stty size)\r');
        await new Promise((resolve) => setTimeout(resolve, 300));
        return shell.output().includes('resized=50 120') ? true : undefined;
      },
      { timeoutMs: 20_000 },
    );
    shell.stdin('exit 7\r');
    await shell.until('exit', () => shell.exit !== undefined);
    expect(shell.exit).toMatchObject({
      reason: ConsoleEndReason.CONSOLE_END_REASON_EXITED,
      exitCode: 7,
    });
    // The shell probe and the terminal itself: every one offered v5 first and got v4.
    const seen = execUpgrades(v4Proxy, from);
    expect(seen.filter((u) => u.path.includes('tty=true'))).toHaveLength(1);
    for (const upgrade of seen) {
      expect(upgrade).toMatchObject({
        offered: [V5, V4],
        forwarded: [V4],
        status: 101,
        negotiated: V4,
      });
    }
  });

  it('no TTY: stdin reaches the command, stdout and stderr stay apart, the exit status arrives', async () => {
    const from = v4Proxy.upgrades.length;
    const reader = open(v4Executor, {
      command: ['sh', '-c', 'read line; echo "got:$line"; echo err-$line >&2; exit 5'],
    });
    await reader.until('opened', () => reader.opened !== undefined);
    reader.stdin('hello\n');
    await reader.until('exit', () => reader.exit !== undefined);
    expect(reader.exit).toMatchObject({
      reason: ConsoleEndReason.CONSOLE_END_REASON_EXITED,
      exitCode: 5,
    });
    const chunks = (stream: number) =>
      reader.messages
        .flatMap((m) =>
          m.output?.$case === 'chunk' && m.output.value.stream === stream
            ? [m.output.value.data]
            : [],
        )
        .map((data) => data.toString('utf8'))
        .join('');
    expect(chunks(1)).toBe('got:hello\n');
    expect(chunks(2)).toBe('err-hello\n');
    // The shell probe and the command: both on v4.
    const seen = execUpgrades(v4Proxy, from);
    expect(seen.length).toBeGreaterThan(0);
    for (const upgrade of seen) expect(upgrade.negotiated).toBe(V4);
  });

  it('closed from the client without a TTY: no CLOSE channel, yet the process is ended and its real exit status arrives', async () => {
    const from = v4Proxy.upgrades.length;
    const waiting = open(v4Executor, {
      command: ['sh', '-c', 'read line; echo "got:$line"; exec sleep 1006'],
    });
    await waiting.until('opened', () => waiting.opened !== undefined);
    waiting.stdin('once\n');
    await waiting.waitForOutput(/got:once/);
    await expectProcessRunning('sleep 1006');
    waiting.send({ input: { $case: 'close', value: { reason: 'closed on v4' } } });
    await waiting.until('exit', () => waiting.exit !== undefined);
    // The second exec's SIGTERM ended it; the connection stayed open for the status (143 = 128 +
    // SIGTERM), which v4 still carries on its status channel.
    expect(waiting.exit).toMatchObject({
      reason: ConsoleEndReason.CONSOLE_END_REASON_CLOSED,
      exitCode: 143,
    });
    await expectProcessGone('sleep 1006');
    await eventually(
      'the session to be released',
      () => Promise.resolve(v4Executor.sessions.running() === 0 ? true : undefined),
      { timeoutMs: 10_000 },
    );
    const seen = execUpgrades(v4Proxy, from);
    // The shell probe, the command and the second exec that ended it.
    expect(seen.length).toBeGreaterThanOrEqual(2);
    for (const upgrade of seen) expect(upgrade.negotiated).toBe(V4);
  });

  it.each([
    { protocol: V5, sleep: 'sleep 1009' },
    { protocol: V4, sleep: 'sleep 1007' },
  ])(
    'closed from the client on a TTY ($protocol): the process in the terminal ends',
    async ({ protocol, sleep }) => {
      const executor = protocol === V4 ? v4Executor : v5Executor;
      const proxy = protocol === V4 ? v4Proxy : plainProxy;
      const from = proxy.upgrades.length;
      const shell = open(executor, { tty: true, command: ['sh', '-c', `exec ${sleep}`] });
      await shell.until('opened', () => shell.opened !== undefined);
      await expectProcessRunning(sleep);
      shell.send({ input: { $case: 'close', value: { reason: 'closed on v4' } } });
      await shell.until('exit', () => shell.exit !== undefined);
      expect(shell.exit?.reason).toBe(ConsoleEndReason.CONSOLE_END_REASON_CLOSED);
      await expectProcessGone(sleep);
      // The shell probe, the terminal and the second exec that ended it.
      const seen = execUpgrades(proxy, from);
      expect(seen.length).toBe(3);
      for (const upgrade of seen) expect(upgrade.negotiated).toBe(protocol);
    },
  );
});
