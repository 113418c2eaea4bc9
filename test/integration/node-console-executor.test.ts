// Node consoles in the executor process against the real API server (kwok nodes; the shell
// itself runs on the real node in test/node/node-console.test.ts). Every refusal is sent straight
// to the executor's socket, as a compromised collector would, and creates no helper. A helper
// that never becomes ready is refused with its status and deleted; the boot sweep removes this
// release's orphan helpers from exec.node.namespace and the release namespace and nothing else.
// An executor without the rbac.nodeShell Role gets the API server's own 403 (RBAC_DENIED), and
// pod and node consoles count against one exec.pod.max_sessions.
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { RefusalCode } from '../../proto/index.js';
import { helperSelector } from '../../executor/node-console/boot-sweep.js';
import { ConsoleStreamClient, signConsoleOpen } from '../helpers/console-stream.js';
import {
  MANAGED_BY,
  MANAGED_BY_LABEL,
  RELEASE_LABEL,
  SESSION_LABEL,
} from '../../executor/node-console/helper-pod.js';
import { generateCommandKeyPair } from '../../shared/signed-command/sign-command.js';
import {
  createTestNamespace,
  eventually,
  loadKubeConfig,
  serveExecLocally,
  TEST_LABEL,
  uniqueName,
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

const admin = loadKubeConfig(inject('kubeconfigPath'));
const core = admin.makeApiClient(CoreV1Api);
const platform = generateCommandKeyPair();
const KEY_ID = 'platform-test';
const RELEASE = 'rel-a';
/** Any digest-pinned image: on kwok nodes nothing is pulled. */
const IMAGE = `kubexa.test/nsenter@sha256:${'a'.repeat(64)}`;

let home: TestNamespace;
let shells: TestNamespace;
let other: TestNamespace;
let dir: string;
let kubeconfigPath: string;
const executors: NodeConsoleExecutor[] = [];

function executorConfig(node: Record<string, unknown>, pod: Record<string, unknown>) {
  return {
    exec: {
      pod: { max_sessions: 2, ...pod },
      node: {
        enabled: true,
        image: IMAGE,
        namespace: shells.name,
        helper_ready_timeout_sec: 3,
        max_session_sec: 10,
        nodes: ['kwok-node-*', 'no-such-node'],
        ...node,
      },
    },
    security: { command_keys: [{ id: KEY_ID, public_key: platform.publicKeyPem }] },
  };
}

async function start(
  node: Record<string, unknown> = {},
  options: { pod?: Record<string, unknown>; kubeconfig?: string } = {},
): Promise<NodeConsoleExecutor> {
  const executor = await startNodeConsoleExecutor({
    kubeconfigPath: options.kubeconfig ?? kubeconfigPath,
    config: executorConfig(node, options.pod ?? {}),
    release: RELEASE,
    releaseNamespace: home.name,
  });
  executors.push(executor);
  return executor;
}

const sign = (node: string, over: Parameters<typeof signNodeConsole>[3] = {}) => {
  return (requestId: string) =>
    signNodeConsole({ key: platform, keyId: KEY_ID }, requestId, node, over);
};

/** A Pod labelled as a helper of `release` (or not a helper at all), sleeping on a kwok node. */
function helperLike(name: string, namespace: string, labels: Record<string, string>): V1Pod {
  return {
    metadata: { name, namespace, labels },
    spec: {
      nodeName: 'kwok-node-0',
      tolerations: [{ operator: 'Exists' }],
      containers: [{ name: 'shell', image: IMAGE, command: ['sleep', '600'] }],
    },
  };
}

const helperLabels = (release: string) => ({
  [MANAGED_BY_LABEL]: MANAGED_BY,
  [RELEASE_LABEL]: release,
  [SESSION_LABEL]: 'req-orphan',
});

beforeAll(async () => {
  home = await createTestNamespace(admin, 'nc-home');
  shells = await createTestNamespace(admin, 'nc-shells');
  other = await createTestNamespace(admin, 'nc-other');
  dir = await mkdtemp(join(tmpdir(), 'kubexa-nc-'));
  // As the chart grants it: the Role in both namespaces the executor may act in.
  kubeconfigPath = await nodeShellIdentity(
    admin,
    { home: home.name, name: 'executor' },
    [shells.name, home.name],
    dir,
  );
}, 60_000);

/** Nodes this file made (besides kwok's) and scratch directories: removed at the end. */
const nodesMade: string[] = [];
const scratch: string[] = [];

afterAll(async () => {
  for (const executor of executors) await executor.stop('SIGTERM');
  for (const name of nodesMade) await core.deleteNode({ name }).catch(() => undefined);
  for (const path of scratch) await rm(path, { recursive: true, force: true });
  await removeExecutorDirs();
  await rm(dir, { recursive: true, force: true });
  for (const ns of [home, shells, other]) await ns.delete();
});

describe('node console refusals, straight to the executor socket', () => {
  let executor: NodeConsoleExecutor;
  let gateOff: NodeConsoleExecutor;

  beforeAll(async () => {
    executor = await start();
    gateOff = await start({ enabled: false });
  }, 120_000);

  const cases: {
    name: string;
    code: RefusalCode;
    reason: RegExp;
    open: () => ReturnType<typeof openNodeConsole>;
  }[] = [
    {
      name: 'the exec.node gate is off (signed correctly)',
      code: RefusalCode.REFUSAL_CODE_GATE_DISABLED,
      reason: /nodeShell gate is off/,
      open: () => openNodeConsole(gateOff.client, 'kwok-node-0', sign('kwok-node-0')),
    },
    {
      name: 'unsigned',
      code: RefusalCode.REFUSAL_CODE_SIGNATURE_INVALID,
      reason: /./,
      open: () => openNodeConsole(executor.client, 'kwok-node-0', () => ''),
    },
    {
      name: 'the cluster:node_console permission is missing (node_write signed instead)',
      code: RefusalCode.REFUSAL_CODE_SIGNATURE_MISMATCH,
      reason: /permission/,
      open: () =>
        openNodeConsole(
          executor.client,
          'kwok-node-0',
          sign('kwok-node-0', { permission: 'cluster:node_write' }),
        ),
    },
    {
      name: 'signed for another node',
      code: RefusalCode.REFUSAL_CODE_SIGNATURE_MISMATCH,
      reason: /target/,
      open: () => openNodeConsole(executor.client, 'kwok-node-0', sign('kwok-node-1')),
    },
    {
      name: 'a pod console signature used for a node',
      code: RefusalCode.REFUSAL_CODE_SIGNATURE_MISMATCH,
      reason: /target/,
      open: () =>
        openNodeConsole(executor.client, 'kwok-node-0', sign('kwok-node-0', { kind: 'pod' })),
    },
    {
      name: 'a node outside exec.node.nodes',
      code: RefusalCode.REFUSAL_CODE_POLICY_DENIED,
      reason: /exec\.node\.nodes/,
      open: () => openNodeConsole(executor.client, 'control-1', sign('control-1')),
    },
    {
      name: 'a node target with a namespace (malformed)',
      code: RefusalCode.REFUSAL_CODE_INVALID_REQUEST,
      reason: /kind "node"/,
      open: () =>
        openNodeConsole(executor.client, 'kwok-node-0', sign('kwok-node-0'), {
          target: { namespace: home.name },
        }),
    },
    {
      name: 'a command over the size limit (65 arguments)',
      code: RefusalCode.REFUSAL_CODE_INVALID_REQUEST,
      reason: /limited to 64 arguments/,
      open: () =>
        openNodeConsole(executor.client, 'kwok-node-0', sign('kwok-node-0'), {
          command: Array.from({ length: 65 }, () => 'x'),
        }),
    },
  ];

  for (const each of cases) {
    it(`refuses: ${each.name}`, async () => {
      const stream = each.open();
      await stream.until('refusal', () => stream.refusal !== undefined);
      expect(stream.refusal?.code).toBe(each.code);
      expect(stream.refusal?.reason).toMatch(each.reason);
      expect(stream.opened).toBeUndefined();
      // The refusal is an audit record too, and no helper was ever created.
      expect(stream.audits.map((a) => a.event)).toEqual(['refusal']);
      expect(await liveHelpers(core, shells.name, RELEASE)).toEqual([]);
    });
  }

  it('refuses a helper that never becomes ready, with its status, and deletes it', async () => {
    const stream = openNodeConsole(executor.client, 'no-such-node', sign('no-such-node'));
    await stream.until('refusal', () => stream.refusal !== undefined, 30_000);
    expect(stream.refusal?.code).toBe(RefusalCode.REFUSAL_CODE_HELPER_NOT_READY);
    expect(stream.refusal?.reason).toMatch(/helper Pod .* on node no-such-node/);
    expect(stream.refusal?.reason).toMatch(/phase Pending|deleted before it ran/);
    await eventually(
      'the helper deleted',
      async () => ((await liveHelpers(core, shells.name, RELEASE)).length === 0 ? true : undefined),
      { timeoutMs: 20_000 },
    );
    const created = executor.lines().find((l) => l['msg'] === 'node-console helper created');
    expect(created?.['node']).toBe('no-such-node');
  });
});

describe('boot sweep', () => {
  it("removes this release's helpers from exec.node.namespace and the release namespace, and only those", async () => {
    const pods: [string, string, Record<string, string>][] = [
      ['orphan-shells', shells.name, helperLabels(RELEASE)],
      ['orphan-home', home.name, helperLabels(RELEASE)],
      ['orphan-elsewhere', other.name, helperLabels(RELEASE)],
      ['other-release', shells.name, helperLabels('rel-b')],
      ['not-a-helper', shells.name, { [MANAGED_BY_LABEL]: MANAGED_BY, [RELEASE_LABEL]: RELEASE }],
    ];
    for (const [name, namespace, labels] of pods) {
      await core.createNamespacedPod({ namespace, body: helperLike(name, namespace, labels) });
    }
    const executor = await start();
    const gone = async (namespace: string, name: string) => {
      try {
        const pod = await core.readNamespacedPod({ name, namespace });
        return pod.metadata?.deletionTimestamp !== undefined;
      } catch {
        return true;
      }
    };
    expect(await gone(shells.name, 'orphan-shells')).toBe(true);
    expect(await gone(home.name, 'orphan-home')).toBe(true);
    expect(await gone(other.name, 'orphan-elsewhere')).toBe(false);
    expect(await gone(shells.name, 'other-release')).toBe(false);
    expect(await gone(shells.name, 'not-a-helper')).toBe(false);
    const sweep = executor
      .lines()
      .find((l) => l['msg'] === 'boot sweep of node-console helpers done');
    expect(sweep?.['deleted']).toEqual([
      `${shells.name}/orphan-shells`,
      `${home.name}/orphan-home`,
    ]);
  }, 120_000);
});

describe("the executor's own identity and session limit, straight to the socket", () => {
  it('an executor whose ServiceAccount lacks the rbac.nodeShell Role gets the real 403: RBAC_DENIED', async () => {
    // A ServiceAccount with no Role at all: what the executor holds with rbac.nodeShell off.
    const bare = await nodeShellIdentity(
      admin,
      { home: home.name, name: 'no-node-shell' },
      [],
      dir,
    );
    const executor = await start({}, { kubeconfig: bare });
    const stream = openNodeConsole(executor.client, 'kwok-node-0', sign('kwok-node-0'));
    await stream.until('refusal', () => stream.refusal !== undefined, 30_000);
    expect(stream.refusal?.code).toBe(RefusalCode.REFUSAL_CODE_RBAC_DENIED);
    // The API server's own answer, named in the reason.
    expect(stream.refusal?.reason).toMatch(/API server answered 403/);
    expect(stream.refusal?.reason).toContain(shells.name);
    expect(stream.opened).toBeUndefined();
    expect(stream.audits.map((a) => a.event)).toEqual(['refusal']);
    expect(stream.audits[0]?.refusal?.code).toBe(RefusalCode.REFUSAL_CODE_RBAC_DENIED);
    expect(await liveHelpers(core, shells.name, RELEASE)).toEqual([]);
  });

  it('a pod console and a node console share exec.pod.max_sessions: the next open of either kind is LIMIT_REACHED', async () => {
    // A node without a kubelet: the helper bound to it stays Pending, so the node console holds
    // its slot (from the open, while its helper starts) until the test deletes the helper.
    const held = uniqueName('nc-limit');
    await core.createNode({
      body: {
        metadata: { name: held, labels: { 'kubernetes.io/hostname': held, [TEST_LABEL]: 'true' } },
        spec: { taints: [{ key: 'kubexa.io/no-kubelet', value: 'true', effect: 'NoSchedule' }] },
      },
    });
    nodesMade.push(held);
    // kwok runs the pod consoles' commands on this machine as the unprivileged user 65534.
    const workDir = await mkdtemp(join(tmpdir(), 'kubexa-nc-exec-'));
    scratch.push(workDir);
    await chmod(workDir, 0o755);
    await serveExecLocally(admin, { namespace: shells.name, workDir });
    const target = { namespace: shells.name, pod: 'console-limit' };
    await core.createNamespacedPod({
      namespace: shells.name,
      body: helperLike(target.pod, shells.name, {}),
    });
    const executor = await start(
      { nodes: ['kwok-node-*', held], helper_ready_timeout_sec: 60, max_session_sec: 120 },
      {
        pod: {
          enabled: true,
          rules: [{ id: 'limit-pods', namespace: shells.name, names: ['console-*'] }],
          max_sessions: 2,
          resume_window_sec: -1,
        },
      },
    );
    const signer = { key: platform, keyId: KEY_ID };
    let n = 0;
    const openPod = (command: string[]): ConsoleStreamClient => {
      n += 1;
      const requestId = `pod-limit-${process.pid}-${n}`;
      const stream = new ConsoleStreamClient(executor.client);
      stream.send({
        input: {
          $case: 'open',
          value: {
            requestId,
            target: {
              kind: 'pod',
              namespace: target.namespace,
              name: target.pod,
              container: '',
              resource: '',
            },
            command,
            tty: false,
            commandSignature: { jws: signConsoleOpen(signer, requestId, target) },
          },
        },
      });
      return stream;
    };
    // kwok picks up a new ClusterExec (and runs the pod) asynchronously: until a command runs.
    await eventually(
      'a pod console to run on kwok',
      async () => {
        const probe = openPod(['true']);
        await probe.until(
          'exit or refusal',
          () => probe.exit !== undefined || probe.refusal !== undefined,
        );
        return probe.exit?.exitCode === 0 ? true : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 1000 },
    );

    const podSession = openPod(['sleep', '60']);
    await podSession.until('the pod console open', () => podSession.opened !== undefined);
    const nodeSession = openNodeConsole(executor.client, held, sign(held));
    const helper = await eventually(
      'the node console helper created',
      async () => (await liveHelpers(core, shells.name, RELEASE))[0],
      { timeoutMs: 20_000 },
    );
    expect(helper.spec?.nodeName).toBe(held);

    // One session of each kind holds the two slots.
    const thirdPod = openPod(['true']);
    await thirdPod.until('refusal', () => thirdPod.refusal !== undefined);
    expect(thirdPod.refusal?.code).toBe(RefusalCode.REFUSAL_CODE_LIMIT_REACHED);
    expect(thirdPod.refusal?.reason).toMatch(/exec\.pod\.max_sessions \(2\)/);
    const thirdNode = openNodeConsole(executor.client, 'kwok-node-0', sign('kwok-node-0'));
    await thirdNode.until('refusal', () => thirdNode.refusal !== undefined);
    expect(thirdNode.refusal?.code).toBe(RefusalCode.REFUSAL_CODE_LIMIT_REACHED);
    expect(thirdNode.refusal?.reason).toMatch(/exec\.pod\.max_sessions/);
    expect(thirdNode.audits.map((a) => a.event)).toEqual(['refusal']);
    // The refused node console created no helper.
    expect((await liveHelpers(core, shells.name, RELEASE)).map((p) => p.metadata?.name)).toEqual([
      helper.metadata?.name,
    ]);

    // The node console's end frees its slot: a pod console opens again.
    await core.deleteNamespacedPod({
      name: helper.metadata?.name ?? '',
      namespace: shells.name,
      gracePeriodSeconds: 0,
    });
    await nodeSession.until('refusal', () => nodeSession.refusal !== undefined, 30_000);
    expect(nodeSession.refusal?.code).toBe(RefusalCode.REFUSAL_CODE_HELPER_NOT_READY);
    const afterNode = openPod(['true']);
    await afterNode.until(
      'exit',
      () => afterNode.exit !== undefined || afterNode.refusal !== undefined,
    );
    expect(afterNode.refusal).toBeUndefined();
    expect(afterNode.exit?.exitCode).toBe(0);

    podSession.send({ input: { $case: 'close', value: { reason: 'done' } } });
    await podSession.until('exit', () => podSession.exit !== undefined);
    await eventually(
      'no helper of this release left',
      async () => {
        const list = await core.listNamespacedPod({
          namespace: shells.name,
          labelSelector: helperSelector(RELEASE),
        });
        return list.items.length === 0 ? true : undefined;
      },
      { timeoutMs: 20_000 },
    );
  }, 150_000);
});
