// Node consoles on the real node, through the executor process's socket with nothing in between
// (the test holds the stream as a collector would). The executor runs as its own ServiceAccount
// with the rbac.nodeShell Role, creates the privileged helper on the node and enters the target
// host process's namespaces with nsenter. PID 1 of these machines cannot be entered, so the
// target is the kubelet (exec.node.nsenter_target_pid), as the docs describe for such hosts.
import { readlinkSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { ConsoleEndReason, RefusalCode } from '../../proto/index.js';
import { generateCommandKeyPair } from '../../shared/signed-command/sign-command.js';
import { clusterVersions } from '../cluster/cluster.js';
import { machineHostname } from '../cluster/node.js';
import {
  createTestNamespace,
  eventually,
  loadKubeConfig,
  type TestNamespace,
} from '../helpers/kube.js';
import {
  liveHelpers,
  nodeShellIdentity,
  openNodeConsole,
  removeExecutorDirs,
  signNodeConsole,
  startNodeConsoleExecutor,
  type NodeConsoleExecutor,
} from '../helpers/node-console-executor.js';
import { pinLocalImage } from './helper-image.js';

const admin = loadKubeConfig(inject('kubeconfigPath'));
const core = admin.makeApiClient(CoreV1Api);
const node = inject('realNodeName');
const kubeletPid = inject('realNodeKubeletPid');
const platform = generateCommandKeyPair();
const SIGNER = { key: platform, keyId: 'platform-test' };
const RELEASE = 'node-console-test';

let home: TestNamespace;
let dir: string;
let kubeconfigPath: string;
let image: string;
const executors: NodeConsoleExecutor[] = [];

async function start(node_: Record<string, unknown> = {}): Promise<NodeConsoleExecutor> {
  const executor = await startNodeConsoleExecutor({
    kubeconfigPath,
    config: {
      exec: {
        pod: { resume_window_sec: -1 },
        node: {
          enabled: true,
          image,
          helper_ready_timeout_sec: 60,
          max_session_sec: 600,
          nodes: [node],
          nsenter_target_pid: kubeletPid,
          ...node_,
        },
      },
      security: { command_keys: [{ id: SIGNER.keyId, public_key: platform.publicKeyPem }] },
    },
    release: RELEASE,
    releaseNamespace: home.name,
  });
  executors.push(executor);
  return executor;
}

const signed = (requestId: string) => signNodeConsole(SIGNER, requestId, node);
const helpers = () => liveHelpers(core, home.name, RELEASE);
const noHelperLeft = (what: string) =>
  eventually(what, async () => ((await helpers()).length === 0 ? true : undefined), {
    timeoutMs: 30_000,
  });

beforeAll(async () => {
  home = await createTestNamespace(admin, 'node-console');
  dir = await mkdtemp(join(tmpdir(), 'kubexa-node-console-'));
  kubeconfigPath = await nodeShellIdentity(
    admin,
    { home: home.name, name: 'executor' },
    [home.name],
    dir,
  );
  image = pinLocalImage(
    inject('clusterBinDir'),
    inject('realNodeContainerdSocket'),
    clusterVersions()['BUSYBOX_IMAGE'] ?? '',
  );
}, 60_000);

afterAll(async () => {
  for (const executor of executors) await executor.stop('SIGTERM');
  await removeExecutorDirs();
  await rm(dir, { recursive: true, force: true });
  await home.delete();
});

describe('node consoles on the real node', () => {
  let executor: NodeConsoleExecutor;

  beforeAll(async () => {
    executor = await start();
  }, 120_000);

  it("sees the host: hostname and mount namespace equal the target process's; the helper is gone after exit", async () => {
    const shell = openNodeConsole(executor.client, node, signed, {
      command: ['sh', '-c', 'hostname; readlink /proc/self/ns/mnt'],
    });
    await shell.until('exit', () => shell.exit !== undefined, 90_000);
    expect(shell.refusal).toBeUndefined();
    expect(shell.exit?.reason).toBe(ConsoleEndReason.CONSOLE_END_REASON_EXITED);
    expect(shell.exit?.exitCode).toBe(0);
    const [hostname, mountNs] = shell.output().trim().split('\n');
    expect(hostname).toBe(machineHostname());
    expect(mountNs).toBe(readlinkSync(`/proc/${kubeletPid}/ns/mnt`));
    await noHelperLeft('the helper deleted after the shell exited');
    const audit = executor.lines().filter((l) => l['msg'] === 'console audit');
    expect(audit.map((l) => (l['audit'] as { event: string }).event)).toEqual(['open', 'close']);
    expect(audit[0]?.['audit']).toMatchObject({
      principal: 'root-admin@example.com',
      target: { kind: 'node', name: node },
      command: ['sh', '-c', 'hostname; readlink /proc/self/ns/mnt'],
      rule: `exec.node.nodes ${node}`,
    });
  });

  it('an interactive shell on a TTY; close ends it and deletes the helper', async () => {
    const shell = openNodeConsole(executor.client, node, signed, { tty: true });
    await shell.until('opened', () => shell.opened !== undefined, 90_000);
    expect(shell.opened?.maxSessionSec).toBe(600);
    expect(await helpers()).toHaveLength(1);
    shell.stdin('echo "in=$(hostname)"\r');
    await shell.waitForOutput(new RegExp(`in=${machineHostname()}`));
    shell.send({ input: { $case: 'close', value: { reason: 'test done' } } });
    await shell.until('exit', () => shell.exit !== undefined);
    expect(shell.exit?.reason).toBe(ConsoleEndReason.CONSOLE_END_REASON_CLOSED);
    await noHelperLeft('the helper deleted after close');
  });
});

describe('the helper never outlives its console', () => {
  it('a helper that never becomes ready: refused with its status and events, and deleted', async () => {
    const missing = await start({
      image: `kubexa.test/not-here@sha256:${'b'.repeat(64)}`,
      helper_ready_timeout_sec: 8,
      max_session_sec: 10,
    });
    const shell = openNodeConsole(missing.client, node, signed);
    await shell.until('refusal', () => shell.refusal !== undefined, 60_000);
    expect(shell.refusal?.code).toBe(RefusalCode.REFUSAL_CODE_HELPER_NOT_READY);
    expect(shell.refusal?.reason).toMatch(
      /not running within exec\.node\.helper_ready_timeout_sec/,
    );
    expect(shell.refusal?.reason).toMatch(/ErrImagePull|ImagePullBackOff|Pulling/);
    await noHelperLeft('the helper deleted after the refusal');
    await missing.stop('SIGTERM');
  });

  it('killed executor: the helper stays; the restarted executor sweeps it; max_session_sec ends a session and its helper', async () => {
    const first = await start({ helper_ready_timeout_sec: 10, max_session_sec: 10 });
    const sleeper = openNodeConsole(first.client, node, signed, { command: ['sleep', '600'] });
    await sleeper.until('opened', () => sleeper.opened !== undefined, 60_000);
    const [orphan] = await helpers();
    expect(orphan).toBeDefined();
    await first.stop('SIGKILL');
    // Nothing ran after SIGKILL: the helper is still there, a root shell nobody holds.
    expect((await helpers()).map((p) => p.metadata?.name)).toEqual([orphan?.metadata?.name]);

    const second = await start({ helper_ready_timeout_sec: 10, max_session_sec: 10 });
    expect((await helpers()).map((p) => p.metadata?.name)).toEqual([]);
    const sweep = second
      .lines()
      .find((l) => l['msg'] === 'boot sweep of node-console helpers done');
    expect(sweep?.['deleted']).toEqual([`${home.name}/${orphan?.metadata?.name ?? ''}`]);

    const long = openNodeConsole(second.client, node, signed, { command: ['sleep', '600'] });
    await long.until('opened', () => long.opened !== undefined, 60_000);
    await long.until('exit', () => long.exit !== undefined, 30_000);
    expect(long.exit?.reason).toBe(ConsoleEndReason.CONSOLE_END_REASON_MAX_SESSION_TIME);
    await noHelperLeft('the helper deleted after max_session_sec');
  }, 240_000);

  it('executor shutdown (SIGTERM) ends node sessions and deletes their helpers', async () => {
    const executor = await start();
    const shell = openNodeConsole(executor.client, node, signed, { command: ['sleep', '600'] });
    await shell.until('opened', () => shell.opened !== undefined, 60_000);
    expect(await helpers()).toHaveLength(1);
    expect(await executor.stop('SIGTERM')).toBe(0);
    expect(await helpers()).toEqual([]);
  }, 180_000);
});
