// A console end to end on the real node: the demo gateway signs and asks, the collector process
// relays (it holds no identity that can exec), the executor decides and execs with its own
// ServiceAccount. Then the two ways a console loses its path: the gateway's call cut, and the
// collector SIGKILLed and restarted; in both the output produced meanwhile arrives once, in order.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import { chromium } from 'playwright-core';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { DemoConsole } from '../../demo-gateway/console-hub.js';
import { DemoGateway } from '../../demo-gateway/demo-gateway.js';
import { ensureUiBuilt } from '../../demo-gateway/ui-build.js';
import { createWebUi } from '../../demo-gateway/web-ui.js';
import { clusterVersions, TEST_NODE_NAMES } from '../cluster/cluster.js';
import { REAL_NODE_LABEL, REAL_NODE_TAINT } from '../cluster/node.js';
import {
  serviceAccountIdentity,
  startTestExecutor,
  type RunningExecutor,
} from '../helpers/console-executor.js';
import {
  createTestNamespace,
  eventually,
  loadKubeConfig,
  serveLogsFromFile,
  type TestNamespace,
} from '../helpers/kube.js';
import { until } from '../helpers/wait.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const kubeconfigPath = inject('kubeconfigPath');
const admin = loadKubeConfig(kubeconfigPath);
const core = admin.makeApiClient(CoreV1Api);
const busybox = clusterVersions()['BUSYBOX_IMAGE'] ?? '';
const TOKEN = 'console-test-token';

let ns: TestNamespace;
/** A pod on a kwok node (simulated: no process runs there), which the page must not offer. */
let kwokNs: TestNamespace;
let gateway: DemoGateway;
let executor: RunningExecutor;
let dir: string;
let collector: ChildProcess | undefined;

function startCollector(): ChildProcess {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    KUBECONFIG: kubeconfigPath,
    KUBEXA_TENANT_TOKEN: TOKEN,
    KUBEXA_EXECUTOR_SOCKET: executor.socketPath,
  };
  delete env['KUBERNETES_SERVICE_HOST'];
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', join(root, 'collector', 'main.ts'), `--config=${join(dir, 'config.yaml')}`],
    { cwd: root, env, stdio: ['ignore', 'ignore', 'inherit'] },
  );
  collector = child;
  return child;
}

async function stopCollector(signal: NodeJS.Signals): Promise<void> {
  const child = collector;
  if (child?.exitCode !== null) return;
  const exited = once(child, 'exit');
  child.kill(signal);
  await exited;
}

/** The agent session that is connected now and advertised consoles. */
function agentSession(notId?: string): Promise<string> {
  return gateway
    .waitForSession((s) => s.state === 'connected' && s.sessionId !== notId)
    .then((s) => s.sessionId);
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
        {
          name: 'main',
          image: busybox,
          imagePullPolicy: 'Never',
          // One log line, so the collector reports the pod and the page offers it.
          command: ['sh', '-c', 'echo console target ready; exec sleep 3600'],
        },
      ],
    },
  };
}

/** Sequence numbers held, without gaps or repeats. */
function expectContiguous(console: DemoConsole): void {
  const seqs = console.transcript.map((chunk) => chunk.seq);
  expect(seqs).toEqual(Array.from({ length: seqs.length }, (_, i) => (seqs[0] ?? 1) + i));
  expect(console.duplicates).toBe(0);
}

const counted = (console: DemoConsole) =>
  console
    .text()
    .split('\n')
    .filter((line) => /^line-\d+$/.test(line.trim()))
    .map((line) => line.trim());

beforeAll(async () => {
  ns = await createTestNamespace(admin, 'console-e2e');
  await core.createNamespacedPod({ namespace: ns.name, body: realNodePod('console-target') });
  const kube = await serviceAccountIdentity(admin, ns.name, 'executor', true);
  gateway = new DemoGateway({ acceptToken: TOKEN }, { logger: pino({ level: 'silent' }) });
  // As the demo does: kwok's nodes only simulate pods.
  gateway.consoles.markSimulatedNodes(TEST_NODE_NAMES);
  const port = await gateway.listen('127.0.0.1', 0);
  executor = await startTestExecutor({
    kube,
    namespace: ns.name,
    commandKey: {
      id: gateway.commandSigner.keyId,
      publicKeyPem: gateway.commandSigner.publicKeyPem,
    },
    pod: { resume_window_sec: 60 },
  });
  dir = mkdtempSync(join(tmpdir(), 'kubexa-console-e2e-'));
  kwokNs = await createTestNamespace(admin, 'console-kwok');
  const kwokLog = join(dir, 'kwok-pod.log');
  writeFileSync(kwokLog, `${new Date().toISOString()} stdout F a pod on a simulated node\n`);
  await serveLogsFromFile(admin, { namespace: kwokNs.name, logsFile: kwokLog });
  await core.createNamespacedPod({
    namespace: kwokNs.name,
    body: {
      metadata: { name: 'simulated', namespace: kwokNs.name },
      spec: { containers: [{ name: 'app', image: 'simulated' }] },
    },
  });
  writeFileSync(
    join(dir, 'config.yaml'),
    [
      'gateway:',
      `  address: 127.0.0.1:${port}`,
      '  tls: false',
      '  reconnect_initial_delay: 200ms',
      '  reconnect_max_delay: 1s',
      'buffer:',
      `  spill_dir: ${JSON.stringify(join(dir, 'data'))}`,
      'collect:',
      '  logs:',
      '    rules:',
      `      - id: console-target`,
      `        namespace: ${ns.name}`,
      `      - id: simulated`,
      `        namespace: ${kwokNs.name}`,
      'observability:',
      '  health_addr: "127.0.0.1:0"',
      '  metrics_addr: "127.0.0.1:0"',
      '',
    ].join('\n'),
  );
  await eventually(
    'the target pod running',
    async () => {
      const pod = await core.readNamespacedPod({ name: 'console-target', namespace: ns.name });
      return pod.status?.phase === 'Running' ? true : undefined;
    },
    { timeoutMs: 90_000, intervalMs: 500 },
  );
  startCollector();
}, 180_000);

afterAll(async () => {
  await stopCollector('SIGKILL');
  await executor.close();
  await gateway.close();
  await ns.delete();
  await kwokNs.delete();
  rmSync(dir, { recursive: true, force: true });
});

describe('a console through the demo gateway, the collector and the executor', () => {
  it('types a command on a TTY and reads its output; the exit and audit records arrive', async () => {
    const session = await agentSession();
    const shell = gateway.consoles.open(session, {
      namespace: ns.name,
      pod: 'console-target',
      tty: true,
      cols: 90,
      rows: 20,
    });
    await until(() => shell.state === 'open', 'the console to open', { intervalMs: 50 });
    shell.stdin('echo hello-$((40+2)); stty size\r');
    await until(
      () => shell.text().includes('hello-42') && shell.text().includes('20 90'),
      'the output',
      { intervalMs: 50 },
    );
    shell.stdin('exit 4\r');
    await until(() => shell.exit !== undefined, 'the exit', { intervalMs: 50 });
    expect(shell.exit).toMatchObject({ reason: 'exited', exitCode: 4 });
    // Audit records come through the buffer as durable messages.
    await until(
      () => gateway.consoles.audits.some((a) => a.event === 'console_close' && a.requestId !== ''),
      'the audit records',
      { intervalMs: 50 },
    );
    const close = gateway.consoles.audits.find((a) => a.event === 'console_close');
    expect(close).toMatchObject({
      principal: 'demo-user@example.com',
      target: `pod/${ns.name}/console-target/main`,
      exitCode: 4,
      tty: true,
      rule: 'test-pods',
    });
    expect(Number(close?.bytesIn)).toBeGreaterThan(0);
    expect(gateway.consoles.audits.some((a) => a.event === 'console_open')).toBe(true);
  });

  it('a refusal reaches the gateway with its code (a pod outside the rules)', async () => {
    const session = await agentSession();
    const refused = gateway.consoles.open(session, {
      namespace: ns.name,
      pod: 'not-a-console-pod',
      command: ['true'],
    });
    await until(() => refused.refusal !== undefined, 'the refusal', { intervalMs: 50 });
    // The signature verifies; reading the pod fails (404) before the rules are consulted.
    expect(['POLICY_DENIED', 'NOT_FOUND']).toContain(refused.refusal?.code);
    await until(
      () => gateway.consoles.audits.some((a) => a.event === 'console_refusal'),
      'the refusal audit',
      { intervalMs: 50 },
    );
  });

  it('the gateway call cut mid-session: re-attached, the output produced meanwhile arrives once, in order', async () => {
    const session = await agentSession();
    const loop = gateway.consoles.open(session, {
      namespace: ns.name,
      pod: 'console-target',
      tty: false,
      command: [
        'sh',
        '-c',
        'i=0; while [ $i -lt 60 ]; do echo line-$i; i=$((i+1)); sleep 0.05; done',
      ],
    });
    await until(() => counted(loop).length >= 5, 'some output', { intervalMs: 50 });
    loop.cut();
    await new Promise((resolve) => setTimeout(resolve, 1000));
    expect(gateway.consoles.reattach(loop, session)).toBe(true);
    await until(() => loop.exit !== undefined, 'the exit after re-attach', { intervalMs: 50 });
    expect(counted(loop)).toEqual(Array.from({ length: 60 }, (_, i) => `line-${i}`));
    expectContiguous(loop);
  });

  it('the collector SIGKILLed mid-session and restarted: the output arrives once, in order', async () => {
    const first = await agentSession();
    const loop = gateway.consoles.open(first, {
      namespace: ns.name,
      pod: 'console-target',
      tty: false,
      command: [
        'sh',
        '-c',
        'i=0; while [ $i -lt 80 ]; do echo line-$i; i=$((i+1)); sleep 0.05; done',
      ],
    });
    await until(() => counted(loop).length >= 5, 'some output', { intervalMs: 50 });
    await stopCollector('SIGKILL');
    await until(() => loop.state === 'detached', 'the console to notice', { intervalMs: 50 });
    startCollector();
    const second = await agentSession(first);
    expect(gateway.consoles.reattach(loop, second)).toBe(true);
    await until(() => loop.exit !== undefined, 'the exit after re-attach', {
      timeoutMs: 60_000,
      intervalMs: 50,
    });
    expect(counted(loop)).toEqual(Array.from({ length: 80 }, (_, i) => `line-${i}`));
    expectContiguous(loop);
    // The close happened while no collector was there: the re-attached stream carried its record.
    const requestOpen = gateway.consoles.audits.find(
      (a) => a.event === 'console_open' && a.sessionId === loop.opened?.sessionId,
    );
    expect(requestOpen).toBeDefined();
    await until(
      () =>
        gateway.consoles.audits.some(
          (a) => a.event === 'console_close' && a.sessionId === loop.opened?.sessionId,
        ),
      'the close record of the re-attached session',
      { intervalMs: 50 },
    );
  }, 90_000);
});

describe('the Consoles view in Chromium', () => {
  const CHROMIUM = process.env['KUBEXA_CHROMIUM'] ?? '/usr/bin/chromium';
  const ARTIFACTS = join(root, 'test-results', 'consoles');

  it('opens a terminal on a pod the collector reported, types a command and reads its output', async () => {
    await ensureUiBuilt();
    const ui = createWebUi(gateway);
    const url = await ui.listen({ host: '127.0.0.1', port: 0 });
    const profile = mkdtempSync(join(tmpdir(), 'kubexa-chromium-'));
    const context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run'],
      viewport: { width: 1400, height: 900 },
    });
    try {
      mkdirSync(ARTIFACTS, { recursive: true });
      const page = context.pages()[0] ?? (await context.newPage());
      await page.goto(`${url}/#/consoles`);
      // The pod comes from the collector's own log lines.
      await page
        .locator('.console-pod option', { hasText: `${ns.name}/console-target` })
        .waitFor({ state: 'attached', timeout: 60_000 });
      // A pod on a kwok node is shown, disabled, with the reason; the page explains why.
      const simulated = page.locator('.console-pod option', {
        hasText: `${kwokNs.name}/simulated`,
      });
      await simulated.waitFor({ state: 'attached', timeout: 60_000 });
      expect(await simulated.isDisabled()).toBe(true);
      expect(await simulated.getAttribute('title')).toMatch(/simulated \(kwok\) node/);
      await expect
        .poll(async () => page.locator('.console-simulated-note').innerText(), { timeout: 10_000 })
        .toMatch(/1 pod\(s\) run on simulated \(kwok\) nodes/);
      await page.screenshot({ path: join(ARTIFACTS, 'console-simulated.png') });
      await page.selectOption('.console-pod', `${ns.name}/console-target`);
      await page.click('.console-open');
      await page.locator('.console-state.state-open').waitFor({ timeout: 30_000 });
      await page.locator('.console-terminal .xterm').click();
      await page.keyboard.type('echo typed-in-$((6*7))');
      await page.keyboard.press('Enter');
      const screen = page.locator('.console-terminal .xterm-rows');
      await expect
        .poll(async () => screen.innerText(), { timeout: 30_000 })
        .toContain('typed-in-42');
      await page.screenshot({ path: join(ARTIFACTS, 'console-typed.png') });
      await page.keyboard.type('exit 5');
      await page.keyboard.press('Enter');
      await page.locator('.console-exit .exit-code', { hasText: '5' }).waitFor({ timeout: 30_000 });
      await page
        .locator('.console-audits tr.audit-console_close')
        .first()
        .waitFor({ timeout: 30_000 });
      await page.screenshot({ path: join(ARTIFACTS, 'console-exited.png') });
    } finally {
      await context.close();
      await ui.close();
      rmSync(profile, { recursive: true, force: true });
    }
  }, 180_000);
});
