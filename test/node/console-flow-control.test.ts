// Flow control of a console through the whole path on the real node: a process in a pod prints
// 50 MiB; the demo gateway (reading slowly for part of the run: it stops reading the agent's call
// for 2 s at every 8 MiB) receives every byte the executor read from the exec, once and in order
// (length against the executor's audit, sequence numbers, and a SHA-256 against the expected
// output), while the collector and the executor, each its own process, keep their RSS bounded.
//
// The bound comes from the relay's sizes:
// - the executor's output window: at most OUTPUT_WINDOW_BYTES (1 MiB) unacknowledged, plus what
//   the paused exec WebSocket had already read (at most one frame, ws maxPayload 4 MiB; the
//   kubelet's are far smaller): 5 MiB;
// - everything between the executor and the gateway is unacknowledged output, so the collector
//   can never hold more than that window either (its HTTP/2 windows and grpc-js queues are inside
//   it);
// - the same again, promoted: chunks held through a gateway pause outlive two young collections,
//   move to the old generation and wait there for a full collection: 5 MiB;
// - the young garbage between two collections: both processes run a young-generation collection
//   every 50 ms (test/helpers/force-gc.mjs), in which well under 1 MiB flows at these rates, three
//   copies of it at most (received, decoded, encoded): 3 MiB;
// - allocator slack: 3 MiB.
// So each process may grow by 16 MiB at most, under a third of what passes through. Without the
// forced young collections, V8 lets dead Buffers pile up until its external-memory trigger (tens
// of MiB), which measures V8's laziness rather than the relay: docs/consoles.md has both figures.
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CoreV1Api } from '@kubernetes/client-node';
import { pino } from 'pino';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { DemoGateway } from '../../demo-gateway/demo-gateway.js';
import { ConsoleEndReason } from '../../proto/index.js';
import { clusterVersions } from '../cluster/cluster.js';
import { REAL_NODE_LABEL, REAL_NODE_TAINT } from '../cluster/node.js';
import { serviceAccountIdentity } from '../helpers/console-executor.js';
import { rssBytes } from '../helpers/executor-socket.js';
import {
  createTestNamespace,
  eventually,
  loadKubeConfig,
  type TestNamespace,
} from '../helpers/kube.js';
import {
  removeExecutorDirs,
  startNodeConsoleExecutor,
  type NodeConsoleExecutor,
} from '../helpers/node-console-executor.js';
import { until } from '../helpers/wait.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const kubeconfigPath = inject('kubeconfigPath');
const admin = loadKubeConfig(kubeconfigPath);
const core = admin.makeApiClient(CoreV1Api);
const busybox = clusterVersions()['BUSYBOX_IMAGE'] ?? '';
const TOKEN = 'console-flow-token';
const MIB = 1024 * 1024;
/** Short, so a re-attach can come after it. */
const RESUME_WINDOW_SEC = 2;
const TOTAL_BYTES = 50 * MIB;
/** Derived above: held, promoted, young garbage and allocator slack. */
const MAX_GROWTH_BYTES = 16 * MIB;
/** A young-generation collection every 50 ms in both processes (test/helpers/force-gc.mjs). */
const FORCE_GC_ARGS = [
  '--expose-gc',
  '--import',
  fileURLToPath(new URL('../helpers/force-gc.mjs', import.meta.url)),
];
/**
 * The NODE_OPTIONS of Dockerfile.collector and Dockerfile.executor. The collector's entrypoint
 * also flushes unused bytecode sooner (three more V8 flags), which only lowers its memory: this
 * test's figures stay on the safe side without them.
 */
const IMAGE_V8_FLAGS = '--max-semi-space-size=8';
/** The process's output: numbered lines, so a chunk lost, repeated or moved changes the hash. */
const COMMAND = ['sh', '-c', `seq 1 20000000 | head -c ${TOTAL_BYTES}`];

/** The SHA-256 of the first `length` bytes of `seq 1 N | head -c TOTAL_BYTES`, computed here. */
function expectedSha256(length: number): string {
  const hash = createHash('sha256');
  let left = length;
  let next = 1;
  while (left > 0) {
    const lines: string[] = [];
    for (let i = 0; i < 100_000; i++) lines.push(String(next++));
    const block = Buffer.from(`${lines.join('\n')}\n`);
    const part = block.subarray(0, Math.min(left, block.length));
    hash.update(part);
    left -= part.length;
  }
  return hash.digest('hex');
}

let ns: TestNamespace;
let dir: string;
let gateway: DemoGateway;
let executor: NodeConsoleExecutor;
let collector: ChildProcess | undefined;

beforeAll(async () => {
  ns = await createTestNamespace(admin, 'console-flow');
  dir = mkdtempSync(join(tmpdir(), 'kubexa-console-flow-'));
  await core.createNamespacedPod({
    namespace: ns.name,
    body: {
      metadata: { name: 'console-flow', namespace: ns.name },
      spec: {
        nodeSelector: { [REAL_NODE_LABEL]: 'true' },
        tolerations: [{ key: REAL_NODE_TAINT, operator: 'Exists', effect: 'NoSchedule' }],
        restartPolicy: 'Never',
        terminationGracePeriodSeconds: 1,
        containers: [
          { name: 'main', image: busybox, imagePullPolicy: 'Never', command: ['sleep', '3600'] },
        ],
      },
    },
  });
  const executorKube = await serviceAccountIdentity(admin, ns.name, 'executor', true);
  const executorKubeconfig = join(dir, 'executor.kubeconfig');
  writeFileSync(executorKubeconfig, executorKube.exportConfig(), { mode: 0o600 });
  gateway = new DemoGateway({ acceptToken: TOKEN }, { logger: pino({ level: 'silent' }) });
  const port = await gateway.listen('127.0.0.1', 0);
  executor = await startNodeConsoleExecutor({
    kubeconfigPath: executorKubeconfig,
    release: 'flow',
    releaseNamespace: ns.name,
    nodeOptions: IMAGE_V8_FLAGS,
    nodeArgs: FORCE_GC_ARGS,
    config: {
      // info: the audit records are in the log.
      log: { level: 'info' },
      exec: {
        pod: {
          enabled: true,
          rules: [{ id: 'test-pods', namespace: ns.name, names: ['console-*'] }],
          resume_window_sec: RESUME_WINDOW_SEC,
        },
      },
      security: {
        command_keys: [
          { id: gateway.commandSigner.keyId, public_key: gateway.commandSigner.publicKeyPem },
        ],
      },
    },
  });
  writeFileSync(
    join(dir, 'collector.yaml'),
    stringify({
      gateway: {
        address: `127.0.0.1:${port}`,
        tls: false,
        reconnect_initial_delay: '200ms',
        reconnect_max_delay: '1s',
      },
      buffer: { spill_dir: join(dir, 'data') },
      log: { level: 'warn' },
      observability: { health_addr: '127.0.0.1:0', metrics_addr: '127.0.0.1:0' },
    }),
  );
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    KUBECONFIG: kubeconfigPath,
    KUBEXA_TENANT_TOKEN: TOKEN,
    KUBEXA_EXECUTOR_SOCKET: executor.socketPath,
    NODE_OPTIONS: IMAGE_V8_FLAGS,
  };
  delete env['KUBERNETES_SERVICE_HOST'];
  collector = spawn(
    process.execPath,
    [
      ...FORCE_GC_ARGS,
      '--import',
      'tsx',
      join(root, 'collector', 'main.ts'),
      `--config=${join(dir, 'collector.yaml')}`,
    ],
    { cwd: root, env, stdio: ['ignore', 'ignore', 'inherit'] },
  );
  await eventually(
    'the target pod running',
    async () => {
      const pod = await core.readNamespacedPod({ name: 'console-flow', namespace: ns.name });
      return pod.status?.phase === 'Running' ? true : undefined;
    },
    { timeoutMs: 90_000, intervalMs: 500 },
  );
}, 180_000);

afterAll(async () => {
  if (collector?.exitCode === null) {
    const exited = once(collector, 'exit');
    collector.kill('SIGKILL');
    await exited;
  }
  await executor.stop('SIGKILL');
  await removeExecutorDirs();
  await gateway.close();
  await ns.delete();
  rmSync(dir, { recursive: true, force: true });
});

describe('flow control through the collector', () => {
  it('50 MiB through demo gateway <- collector <- executor: every byte once, in order; both processes stay bounded while the gateway lags', async () => {
    const collectorPid = collector?.pid;
    const executorPid = executor.child.pid;
    if (collectorPid === undefined || executorPid === undefined) throw new Error('no process');
    const session = await gateway
      .waitForSession((s) => s.state === 'connected')
      .then((s) => s.sessionId);
    const target = { namespace: ns.name, pod: 'console-flow', tty: false };

    // Warm the path (modules loaded, connections up) before the baseline.
    const warm = gateway.consoles.open(session, { ...target, command: ['echo', 'warm'] });
    await until(() => warm.exit !== undefined, 'the warm-up console', { intervalMs: 50 });
    expect(warm.text()).toBe('warm\n');
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const baseline = {
      collector: await rssBytes(collectorPid),
      executor: await rssBytes(executorPid),
    };
    const peak = { ...baseline };
    const sampler = setInterval(() => {
      void Promise.all([rssBytes(collectorPid), rssBytes(executorPid)])
        .then(([c, e]) => {
          peak.collector = Math.max(peak.collector, c);
          peak.executor = Math.max(peak.executor, e);
        })
        .catch(() => undefined);
    }, 50);

    const hash = createHash('sha256');
    let received = 0;
    let expectedSeq = 1;
    let outOfOrder = 0;
    let pausedMs = 0;
    const pauses: Promise<void>[] = [];
    const startedMs = Date.now();
    const big = gateway.consoles.open(session, { ...target, command: COMMAND });
    big.on('output', (data, seq) => {
      if (seq !== expectedSeq) outOfOrder += 1;
      expectedSeq = seq + 1;
      const before = received;
      received += data.length;
      hash.update(data);
      // The gateway lags: at every 8 MiB it stops reading the agent's call for 2 s.
      if (Math.floor(received / (8 * MIB)) > Math.floor(before / (8 * MIB))) {
        big.pauseReading();
        pauses.push(
          new Promise((resolve) =>
            setTimeout(() => {
              pausedMs += 2000;
              big.resumeReading();
              resolve();
            }, 2000),
          ),
        );
      }
    });
    try {
      await until(() => big.exit !== undefined, 'the 50 MiB console to exit', {
        timeoutMs: 240_000,
        intervalMs: 100,
      });
      await Promise.all(pauses);
    } finally {
      clearInterval(sampler);
    }
    const elapsedMs = Date.now() - startedMs;

    expect(big.exit).toMatchObject({ reason: 'exited', exitCode: 0 });
    expect(outOfOrder).toBe(0);
    expect(big.duplicates).toBe(0);
    // What the executor read from the exec WebSocket (its close audit record's bytes_out, written
    // before the exit is sent): the agent delivers exactly that, whatever the cluster delivered.
    // A run short of TOTAL_BYTES with this met lost the bytes before the executor's session: the
    // exec WebSocket delivered the output cut short, then a success status (docs/consoles.md,
    // "Output lost before the executor").
    const closeAudit = executor.lines().find((line) => {
      const audit = line['audit'] as { event?: string; sessionId?: string } | undefined;
      return audit?.event === 'close' && audit.sessionId === big.opened?.sessionId;
    })?.['audit'] as { bytesOut?: string } | undefined;
    expect(received).toBe(Number(closeAudit?.bytesOut));
    // Every byte the executor read, once and in order: the SHA-256 of what the gateway received is
    // that of the expected output's first `received` bytes.
    expect(hash.digest('hex')).toBe(expectedSha256(received));
    // Not asserted: all 50 MiB. About one run in three here, the exec WebSocket itself delivers the
    // output cut short and then a success status (docs/consoles.md, "Output lost before the
    // executor"; kubectl exec shows the same upstream, kubernetes/kubernetes#124571); the agent
    // can neither see nor repair that, and what it owns is checked above. The memory bound below
    // must still hold with at least twice its size passing through.
    expect(received).toBeGreaterThanOrEqual(2 * MAX_GROWTH_BYTES);
    if (received < TOTAL_BYTES) {
      process.stdout.write(
        `console flow control: the exec delivered ${String(received)} of ${String(TOTAL_BYTES)} ` +
          'bytes (cut before the executor, then a success status)\n',
      );
    }
    // The gateway really lagged: a pause of 2 s at every 8 MiB.
    expect(pauses.length).toBe(Math.floor(received / (8 * MIB)));

    const growth = {
      collector: peak.collector - baseline.collector,
      executor: peak.executor - baseline.executor,
    };
    process.stdout.write(
      `console flow control: ${String(received)} bytes in ${String(elapsedMs)} ms ` +
        `(${String(pausedMs)} ms of it with the gateway paused; ` +
        `${(received / MIB / ((elapsedMs - pausedMs) / 1000)).toFixed(1)} MiB/s while reading); ` +
        `collector RSS ${(baseline.collector / MIB).toFixed(1)} -> peak ${(peak.collector / MIB).toFixed(1)} MiB ` +
        `(+${(growth.collector / MIB).toFixed(1)}), executor RSS ${(baseline.executor / MIB).toFixed(1)} -> ` +
        `peak ${(peak.executor / MIB).toFixed(1)} MiB (+${(growth.executor / MIB).toFixed(1)}); ` +
        `load average ${loadavg()
          .map((l) => l.toFixed(2))
          .join(' ')}\n`,
    );
    expect(growth.collector).toBeLessThan(MAX_GROWTH_BYTES);
    expect(growth.executor).toBeLessThan(MAX_GROWTH_BYTES);
  }, 300_000);
});

describe('resume through the collector, after the window', () => {
  it('the gateway re-attaches after the resume window: refused as RESUME_EXPIRED and the reason says so', async () => {
    const session = await gateway
      .waitForSession((s) => s.state === 'connected')
      .then((s) => s.sessionId);
    const sleeper = gateway.consoles.open(session, {
      namespace: ns.name,
      pod: 'console-flow',
      tty: false,
      command: ['sh', '-c', 'echo started; exec sleep 1008'],
    });
    await until(() => sleeper.text().includes('started'), 'the console to start', {
      intervalMs: 50,
    });
    const sessionId = sleeper.opened?.sessionId ?? '';
    sleeper.cut();
    // The executor ends the session when its window passes, and says why in its audit record.
    await eventually(
      'the session ended by the resume window',
      () =>
        Promise.resolve(
          executor.lines().some((line) => {
            const audit = line['audit'] as
              { event?: string; sessionId?: string; endReason?: number } | undefined;
            return (
              audit?.event === 'close' &&
              audit.sessionId === sessionId &&
              audit.endReason === ConsoleEndReason.CONSOLE_END_REASON_RESUME_WINDOW_EXPIRED
            );
          })
            ? true
            : undefined,
        ),
      { timeoutMs: 30_000, intervalMs: 200 },
    );
    expect(gateway.consoles.reattach(sleeper, session)).toBe(true);
    await until(() => sleeper.refusal !== undefined, 'the refusal of the late attach', {
      intervalMs: 50,
    });
    expect(sleeper.state).toBe('refused');
    expect(sleeper.refusal?.code).toBe('RESUME_EXPIRED');
    expect(sleeper.refusal?.reason).toMatch(/no stream re-attached within its resume window/);
  }, 60_000);
});
