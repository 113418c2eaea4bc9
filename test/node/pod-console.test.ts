// Pod consoles on the real node, through the executor's socket with nothing in between: the test
// holds the stream as a collector (possibly a compromised one) would. The executor execs with its
// own ServiceAccount (a token minted here, RBAC as the chart grants it), against a real kubelet and
// runtime: a real TTY, real exit codes, real flow control.
import { CoreV1Api, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { ConsoleEndReason, RefusalCode } from '../../proto/index.js';
import {
  generateCommandKeyPair,
  type CommandKeyPair,
} from '../../shared/signed-command/sign-command.js';
import type { GateName } from '../../executor/guard/authorize-command.js';
import type { ExecPodConfig } from '../../executor/sessions/pod-consoles.js';
import { clusterVersions } from '../cluster/cluster.js';
import { REAL_NODE_LABEL, REAL_NODE_TAINT } from '../cluster/node.js';
import {
  serviceAccountIdentity,
  startTestExecutor,
  type RunningExecutor,
} from '../helpers/console-executor.js';
import { openPodExec } from '../../executor/sessions/pod-exec-socket.js';
import {
  ConsoleStreamClient,
  signConsoleAttach,
  signConsoleOpen,
  type ConsoleTarget,
} from '../helpers/console-stream.js';
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
const KEY_ID = 'platform-test';
const SIGNER = { key: platform, keyId: KEY_ID };

let ns: TestNamespace;

const running: RunningExecutor[] = [];

async function startExecutor(
  kube: KubeConfig,
  pod: Partial<ExecPodConfig>,
  gates: GateName[] = ['podExec'],
): Promise<RunningExecutor> {
  const executor = await startTestExecutor({
    kube,
    namespace: ns.name,
    commandKey: { id: KEY_ID, publicKeyPem: platform.publicKeyPem },
    pod,
    gates,
  });
  running.push(executor);
  return executor;
}

let requestCounter = 0;

/** Opens a console the way a collector relays a signed open. */
function open(
  executor: RunningExecutor,
  target: ConsoleTarget,
  options: { command?: string[]; tty?: boolean; cols?: number; rows?: number; jws?: string } = {},
): ConsoleStreamClient {
  requestCounter += 1;
  const requestId = `req-${requestCounter}`;
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
          container: target.container ?? '',
          resource: '',
        },
        command: options.command ?? [],
        tty: options.tty ?? false,
        ...(options.cols === undefined
          ? {}
          : { size: { cols: options.cols, rows: options.rows ?? 24 } }),
        commandSignature: {
          jws: options.jws ?? signConsoleOpen(SIGNER, requestId, target),
        },
      },
    },
  });
  return stream;
}

function realNodePod(name: string): V1Pod {
  return {
    metadata: { name, namespace: ns.name },
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
}

/** `ps` in the console pod through a second exec (the admin's), as its text. */
async function processesInPod(): Promise<string> {
  let text = '';
  await new Promise<void>((resolve, reject) => {
    openPodExec(
      admin,
      { namespace: ns.name, pod: 'console-shell', container: 'main', command: ['ps'], tty: false },
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

/** Waits until no process in the console pod runs `command` (e.g. "sleep 1001"). */
async function expectProcessGone(command: string): Promise<void> {
  await eventually(
    `no "${command}" left in the pod`,
    async () => ((await processesInPod()).includes(command) ? undefined : true),
    { timeoutMs: 15_000, intervalMs: 250 },
  );
}

/** Attach as a collector relays it, with the given signature ('' = none). */
function attachStream(
  on: RunningExecutor,
  sessionId: string,
  jws: string,
  resumeAfter = 0,
): ConsoleStreamClient {
  const stream = new ConsoleStreamClient(on.client, resumeAfter);
  stream.send({
    input: {
      $case: 'attach',
      value: { sessionId, resumeAfter: String(resumeAfter), commandSignature: { jws } },
    },
  });
  return stream;
}

let executorKube: KubeConfig;
let noExecKube: KubeConfig;
let executor: RunningExecutor;
const pod = (): ConsoleTarget => ({ namespace: ns.name, pod: 'console-shell' });

beforeAll(async () => {
  ns = await createTestNamespace(admin, 'pod-console');
  await core.createNamespacedPod({ namespace: ns.name, body: realNodePod('console-shell') });
  await core.createNamespacedPod({ namespace: ns.name, body: realNodePod('outside-rules') });
  executorKube = await serviceAccountIdentity(admin, ns.name, 'executor', true);
  noExecKube = await serviceAccountIdentity(admin, ns.name, 'no-exec', false);
  for (const name of ['console-shell', 'outside-rules']) {
    await eventually(
      `pod ${name} running`,
      async () => {
        const found = await core.readNamespacedPod({ name, namespace: ns.name });
        return found.status?.phase === 'Running' ? true : undefined;
      },
      { timeoutMs: 90_000, intervalMs: 500 },
    );
  }
  executor = await startExecutor(executorKube, {});
}, 180_000);

afterAll(async () => {
  for (const each of running) await each.close();
  await ns.delete();
});

describe('pod consoles through the executor on the real node', () => {
  it('an interactive sh on a TTY: typed commands run, stty size follows a resize, exit status comes back', async () => {
    const shell = open(executor, pod(), { tty: true, cols: 100, rows: 30 });
    await shell.until('opened', () => shell.opened !== undefined);
    expect(shell.opened?.container).toBe('main');
    expect(shell.opened?.command).toEqual(['/bin/sh']);
    expect(shell.opened?.principal).toBe('alice@example.com');
    shell.stdin('tty; echo size=$(stty size)\r');
    await shell.waitForOutput(/size=30 100/);
    expect(shell.output()).toMatch(/\/dev\/pts\/\d+/);
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
    expect(shell.exit?.reason).toBe(ConsoleEndReason.CONSOLE_END_REASON_EXITED);
    expect(shell.exit?.exitCode).toBe(7);
    await shell.waitForEnd();
    const close = executor
      .auditLines()
      .find((line) => (line['audit'] as { event?: string; requestId?: string }).event === 'close');
    expect(close?.['audit']).toMatchObject({ exitCode: 7, tty: true, rule: 'test-pods' });
    // Stdin is never logged: the typed command is nowhere in the executor's log.
    expect(JSON.stringify(executor.auditLines())).not.toContain('resized=');
  });

  it('a TTY command that asks its size the moment it starts gets the size the client asked for', async () => {
    // The runtime applies the resize channel's first size after the process has started; without
    // the wrapper's wait (marked-processes.ts) `stty size` run at once sees no size at all.
    for (const [cols, rows] of [
      [91, 23],
      [132, 43],
    ] as const) {
      const sized = open(executor, pod(), { command: ['stty', 'size'], tty: true, cols, rows });
      await sized.until('exit', () => sized.exit !== undefined);
      expect(sized.output().trim()).toBe(`${rows} ${cols}`);
      expect(sized.exit?.exitCode).toBe(0);
    }
  });

  it('a command reads stdin (no TTY): stdout and stderr are separate, stdin end is seen', async () => {
    const cat = open(executor, pod(), {
      command: ['sh', '-c', 'read line; echo "got:$line"; echo err >&2; cat; echo done'],
    });
    await cat.until('opened', () => cat.opened !== undefined);
    cat.stdin('hello\n');
    await cat.waitForOutput(/got:hello/);
    cat.stdin('more\n');
    await cat.waitForOutput(/more/);
    const stderr = cat.messages.filter(
      (m) => m.output?.$case === 'chunk' && m.output.value.stream === 2,
    );
    expect(stderr.length).toBeGreaterThan(0);
    // Closing the console ends the process; the exit says it was closed.
    cat.send({ input: { $case: 'close', value: { reason: 'test done' } } });
    await cat.until('exit', () => cat.exit !== undefined);
    expect(cat.exit?.reason).toBe(ConsoleEndReason.CONSOLE_END_REASON_CLOSED);
  });

  it('a non-zero exit status is reported as such', async () => {
    const failing = open(executor, pod(), { command: ['sh', '-c', 'echo out; exit 3'] });
    await failing.until('exit', () => failing.exit !== undefined);
    expect(failing.exit?.reason).toBe(ConsoleEndReason.CONSOLE_END_REASON_EXITED);
    expect(failing.exit?.exitCode).toBe(3);
    expect(failing.output()).toBe('out\n');
  });

  it('50 MB of output arrives complete and in order; a slow reader pauses the exec, memory stays bounded', async () => {
    const total = 50 * 1024 * 1024;
    const big = open(executor, pod(), {
      command: ['sh', '-c', `head -c ${total} /dev/zero | tr '\\0' x`],
    });
    big.keepOutput = false;
    // A slow reader: acks trail behind, so the output window closes and the exec socket is
    // paused at its source (the kubelet's writes block) instead of output piling up here.
    big.autoAck = false;
    let peakHeld = 0;
    const acker = setInterval(() => {
      big.ack(big.lastSeq);
    }, 50);
    const sampler = setInterval(() => {
      peakHeld = Math.max(peakHeld, executor.sessions.heldBytes());
    }, 5);
    try {
      await big.until('exit', () => big.exit !== undefined, 170_000);
    } finally {
      clearInterval(acker);
      clearInterval(sampler);
    }
    expect(big.exit?.exitCode).toBe(0);
    // Nothing lost: every byte arrived, in order (the helper throws on a sequence gap).
    expect(big.outputBytes).toBe(total);
    // Bounded: the window (1 MiB) plus what was in flight when the socket paused.
    expect(peakHeld).toBeGreaterThan(0);
    expect(peakHeld).toBeLessThan(3 * 1024 * 1024);
  }, 180_000);
});

describe('limits from the executor’s own config', () => {
  it('max_session_sec ends the session with a reason that says so', async () => {
    const short = await startExecutor(executorKube, { max_session_sec: 2 });
    const shell = open(short, pod(), { command: ['sleep', '1002'] });
    await shell.until('exit', () => shell.exit !== undefined, 30_000);
    expect(shell.exit?.reason).toBe(ConsoleEndReason.CONSOLE_END_REASON_MAX_SESSION_TIME);
    expect(shell.exit?.message).toMatch(/max_session_sec/);
    await expectProcessGone('sleep 1002');
  });

  it('the max_sessions + 1-th open is refused as LIMIT_REACHED', async () => {
    const limited = await startExecutor(executorKube, { max_sessions: 2 });
    const first = open(limited, pod(), { command: ['sleep', '60'] });
    const second = open(limited, pod(), { command: ['sleep', '60'] });
    await first.until('opened', () => first.opened !== undefined);
    await second.until('opened', () => second.opened !== undefined);
    const third = open(limited, pod(), { command: ['sleep', '60'] });
    await third.until('refusal', () => third.refusal !== undefined);
    expect(third.refusal?.code).toBe(RefusalCode.REFUSAL_CODE_LIMIT_REACHED);
    expect(third.audits[0]).toMatchObject({ event: 'refusal', principal: 'alice@example.com' });
    // A slot frees when a session ends.
    first.send({ input: { $case: 'close', value: { reason: 'free a slot' } } });
    await first.until('exit', () => first.exit !== undefined);
    const fourth = open(limited, pod(), { command: ['true'] });
    await fourth.until('exit', () => fourth.exit !== undefined);
    expect(fourth.exit?.exitCode).toBe(0);
    second.send({ input: { $case: 'close', value: { reason: 'done' } } });
  });
});

describe('refusals whatever the collector sends (straight to the socket)', () => {
  it('a pod outside exec.pod.rules is refused as POLICY_DENIED', async () => {
    const target = { namespace: ns.name, pod: 'outside-rules' };
    const refused = open(executor, target, { command: ['true'] });
    await refused.until('refusal', () => refused.refusal !== undefined);
    expect(refused.refusal?.code).toBe(RefusalCode.REFUSAL_CODE_POLICY_DENIED);
    expect(refused.refusal?.reason).toContain('exec.pod.rules');
  });

  it('exec.pod.enabled off is refused as GATE_DISABLED, even with a valid signature', async () => {
    const off = await startExecutor(executorKube, {}, []);
    const refused = open(off, pod(), { command: ['true'] });
    await refused.until('refusal', () => refused.refusal !== undefined);
    expect(refused.refusal?.code).toBe(RefusalCode.REFUSAL_CODE_GATE_DISABLED);
  });

  it('an identity without pods/exec (rbac.exec off) gets a real 403: RBAC_DENIED', async () => {
    const noRbac = await startExecutor(noExecKube, {});
    const refused = open(noRbac, { ...pod(), container: 'main' }, { command: ['true'] });
    await refused.until('refusal', () => refused.refusal !== undefined);
    expect(refused.refusal?.code).toBe(RefusalCode.REFUSAL_CODE_RBAC_DENIED);
    expect(refused.refusal?.reason).toContain('403');
  });

  it('an unsigned open and a replayed signature are refused', async () => {
    const unsigned = open(executor, pod(), { command: ['true'], jws: '' });
    await unsigned.until('refusal', () => unsigned.refusal !== undefined);
    expect(unsigned.refusal?.code).toBe(RefusalCode.REFUSAL_CODE_SIGNATURE_INVALID);
    const jws = signConsoleOpen(SIGNER, 'replayed', pod());
    const stream = (id: string) => {
      const s = new ConsoleStreamClient(executor.client);
      s.send({
        input: {
          $case: 'open',
          value: {
            requestId: id,
            target: {
              kind: 'pod',
              namespace: ns.name,
              name: 'console-shell',
              container: '',
              resource: '',
            },
            command: ['true'],
            tty: false,
            commandSignature: { jws },
          },
        },
      });
      return s;
    };
    const first = stream('replayed');
    await first.until('exit', () => first.exit !== undefined);
    const again = stream('replayed');
    await again.until('refusal', () => again.refusal !== undefined);
    expect(again.refusal?.code).toBe(RefusalCode.REFUSAL_CODE_SIGNATURE_REPLAYED);
  });
});

describe('resume: a session outlives its stream for the resume window', () => {
  it('a cut stream re-attaches and gets the output produced meanwhile once, in order', async () => {
    const shell = open(executor, pod(), {
      command: [
        'sh',
        '-c',
        'i=0; while [ $i -lt 40 ]; do echo line-$i; i=$((i+1)); sleep 0.05; done',
      ],
    });
    await shell.waitForOutput(/line-3\n/);
    const sessionId = shell.opened?.sessionId ?? '';
    const held = shell.lastSeq;
    const before = shell.output();
    shell.cut();
    await new Promise((resolve) => setTimeout(resolve, 800));
    const resumed = attachStream(
      executor,
      sessionId,
      signConsoleAttach(SIGNER, sessionId, { ...pod(), container: 'main' }),
      held,
    );
    await resumed.until('exit', () => resumed.exit !== undefined);
    const all = before + resumed.output();
    const lines = all.trim().split('\n');
    expect(lines).toEqual(Array.from({ length: 40 }, (_, i) => `line-${i}`));
    expect(resumed.opened?.replayFrom).toBe(String(held + 1));
  });

  it('after the window the session is gone and the reason says so', async () => {
    const quick = await startExecutor(executorKube, { resume_window_sec: 1 });
    const shell = open(quick, pod(), { command: ['sleep', '1003'] });
    await shell.until('opened', () => shell.opened !== undefined);
    // Opened comes before the wrapper has exec'd the command: wait until ps shows it.
    await eventually(
      'sleep 1003 to run in the pod',
      async () => ((await processesInPod()).includes('sleep 1003') ? true : undefined),
      { timeoutMs: 20_000 },
    );
    const sessionId = shell.opened?.sessionId ?? '';
    shell.cut();
    await eventually(
      'the session to end',
      () => Promise.resolve(quick.sessions.running() === 0 ? true : undefined),
      { timeoutMs: 20_000 },
    );
    const late = attachStream(
      quick,
      sessionId,
      signConsoleAttach(SIGNER, sessionId, { ...pod(), container: 'main' }),
    );
    await late.until('refusal', () => late.refusal !== undefined);
    expect(late.refusal?.code).toBe(RefusalCode.REFUSAL_CODE_RESUME_EXPIRED);
    expect(late.refusal?.reason).toMatch(/resume window/);
    // The process without a TTY ended with the session, not only its connection.
    await expectProcessGone('sleep 1003');
  });
});

describe('a re-attach needs a fresh signed command (straight to the socket)', () => {
  it('refuses an unsigned, expired, replayed or other-session attach; a fresh one re-attaches', async () => {
    const target = { ...pod(), container: 'main' };
    const first = open(executor, pod(), { command: ['sleep', '1005'] });
    const other = open(executor, pod(), { command: ['sleep', '1006'] });
    await first.until('opened', () => first.opened !== undefined);
    await other.until('opened', () => other.opened !== undefined);
    const sessionId = first.opened?.sessionId ?? '';
    const otherId = other.opened?.sessionId ?? '';
    first.cut();
    const refusedWith = async (jws: string) => {
      const stream = attachStream(executor, sessionId, jws);
      await stream.until('refusal', () => stream.refusal !== undefined);
      expect(stream.opened).toBeUndefined();
      return stream.refusal?.code;
    };
    // The session id alone, as a compromised collector that saw it would try.
    expect(await refusedWith('')).toBe(RefusalCode.REFUSAL_CODE_SIGNATURE_INVALID);
    expect(
      await refusedWith(signConsoleAttach(SIGNER, sessionId, target, { issuedAgoSec: 120 })),
    ).toBe(RefusalCode.REFUSAL_CODE_SIGNATURE_EXPIRED);
    // A valid attach signed for the other session.
    expect(await refusedWith(signConsoleAttach(SIGNER, otherId, target))).toBe(
      RefusalCode.REFUSAL_CODE_SIGNATURE_MISMATCH,
    );
    // An open's signature for the same target is not an attach.
    expect(await refusedWith(signConsoleOpen(SIGNER, 'req-open-as-attach', target))).toBe(
      RefusalCode.REFUSAL_CODE_SIGNATURE_MISMATCH,
    );
    // Signed for the session, but for someone else than the principal it was opened for.
    expect(
      await refusedWith(
        signConsoleAttach(SIGNER, sessionId, target, { principal: 'mallory@example.com' }),
      ),
    ).toBe(RefusalCode.REFUSAL_CODE_SIGNATURE_MISMATCH);
    // A signature from a key the executor does not hold.
    const stranger = { key: generateCommandKeyPair(), keyId: KEY_ID };
    expect(await refusedWith(signConsoleAttach(stranger, sessionId, target))).toBe(
      RefusalCode.REFUSAL_CODE_SIGNATURE_INVALID,
    );
    // Refused attaches are audited and leave the session running.
    expect(
      executor
        .auditLines()
        .filter((line) => (line['audit'] as { sessionId?: string }).sessionId === sessionId)
        .filter((line) => (line['audit'] as { event?: string }).event === 'refusal').length,
    ).toBeGreaterThanOrEqual(6);
    const jws = signConsoleAttach(SIGNER, sessionId, target);
    const resumed = attachStream(executor, sessionId, jws);
    await resumed.until('opened', () => resumed.opened !== undefined);
    expect(resumed.opened?.sessionId).toBe(sessionId);
    resumed.cut();
    // The same signature again: replayed.
    expect(await refusedWith(jws)).toBe(RefusalCode.REFUSAL_CODE_SIGNATURE_REPLAYED);
    const again = attachStream(executor, sessionId, signConsoleAttach(SIGNER, sessionId, target));
    await again.until('opened', () => again.opened !== undefined);
    again.send({ input: { $case: 'close', value: { reason: 'done' } } });
    other.send({ input: { $case: 'close', value: { reason: 'done' } } });
    await again.until('exit', () => again.exit !== undefined);
    await other.until('exit', () => other.exit !== undefined);
  });
});

describe('ending a session ends its process without a TTY', () => {
  it('close: the command and its children are gone from the container (checked with ps)', async () => {
    const plain = open(executor, pod(), { command: ['sleep', '1001'] });
    // A shell that forks its child: the child carries the marker too.
    const forked = open(executor, pod(), { command: ['sh', '-c', 'sleep 1004; echo never'] });
    await plain.until('opened', () => plain.opened !== undefined);
    await forked.until('opened', () => forked.opened !== undefined);
    await eventually(
      'both processes running',
      async () => {
        const ps = await processesInPod();
        return ps.includes('sleep 1001') && ps.includes('sleep 1004') ? true : undefined;
      },
      { timeoutMs: 10_000, intervalMs: 200 },
    );
    for (const stream of [plain, forked]) {
      stream.send({ input: { $case: 'close', value: { reason: 'closed by the test' } } });
    }
    await plain.until('exit', () => plain.exit !== undefined);
    await forked.until('exit', () => forked.exit !== undefined);
    expect(plain.exit?.reason).toBe(ConsoleEndReason.CONSOLE_END_REASON_CLOSED);
    await expectProcessGone('sleep 1001');
    await expectProcessGone('sleep 1004');
    expect(forked.output()).not.toContain('never');
  });
});
