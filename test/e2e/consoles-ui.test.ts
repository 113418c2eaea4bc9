// The Consoles view in headless Chromium, on the real path but without the real node: a test
// cluster of its own (the e2e project has no globalSetup and does not need root, so the real
// node, which needs both, is not available here), kwok's exec run through the real API server
// (kwok runs the command on this machine as the unprivileged user 65534, on a real pseudo
// terminal it resizes on the resize channel), the executor with its own ServiceAccount, the
// collector process relaying, and the demo gateway's page. The page types into xterm.js and
// reads the terminal back, resizes the browser window and sees `stty size` change in the
// process, shows a refusal with its code and reason, and lists the open and close audit records.
// The same view on a real container's TTY is tested in test/node/console-through-gateway.test.ts.
// Screenshots are kept in the test's temp directory (its path is printed).
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { CoreV1Api, Exec } from '@kubernetes/client-node';
import type { Page } from 'playwright-core';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DemoGateway } from '../../demo-gateway/demo-gateway.js';
import { ensureUiBuilt } from '../../demo-gateway/ui-build.js';
import { startCluster, stopCluster, type ClusterOptions } from '../cluster/cluster.js';
import {
  serviceAccountIdentity,
  startTestExecutor,
  type RunningExecutor,
} from '../helpers/console-executor.js';
import { openDemoPage, requireChromium } from '../helpers/demo-page.js';
import {
  createTestNamespace,
  criLine,
  eventually,
  loadKubeConfig,
  serveExecLocally,
  serveLogsFromFile,
} from '../helpers/kube.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const TOKEN = 'consoles-ui-test-token';
const UI_WAIT_MS = 60_000;

describe('the Consoles view in headless Chromium (kwok exec through the API server)', () => {
  let page: Page;
  let url: string;
  let namespace: string;
  let dir: string;
  let shots: string;
  const cleanups: (() => unknown)[] = [];

  const shot = async (name: string) => {
    await page.screenshot({ path: join(shots, `${name}.png`), fullPage: true });
  };
  const screen = () => page.locator('.console-terminal .xterm-rows');
  /** The terminal's text once `pattern` shows in it. */
  const waitForScreen = async (pattern: RegExp): Promise<string> => {
    await expect.poll(async () => screen().innerText(), { timeout: UI_WAIT_MS }).toMatch(pattern);
    return screen().innerText();
  };
  /** Types a line into xterm.js as a user does: its hidden textarea has the focus. */
  const typeLine = async (line: string) => {
    await page.keyboard.type(line);
    await page.keyboard.press('Enter');
  };
  const openConsoleOn = async (pod: string) => {
    await page.goto(`${url}/#/consoles`);
    await page
      .locator('.console-pod option', { hasText: `${namespace}/${pod}` })
      .waitFor({ state: 'attached', timeout: UI_WAIT_MS });
    await page.selectOption('.console-pod', `${namespace}/${pod}`);
    await page.click('.console-open');
  };

  beforeAll(async () => {
    requireChromium();
    await ensureUiBuilt();
    dir = mkdtempSync(join(tmpdir(), 'kubexa-consoles-ui-'));
    shots = join(dir, 'screenshots');
    mkdirSync(shots);
    process.stdout.write(`consoles-ui screenshots: ${shots}\n`);
    const clusterOptions = (): ClusterOptions => ({
      name: `kubexa-consoles-ui-${String(process.pid)}`,
      workdir: mkdtempSync(join(tmpdir(), 'kubexa-consoles-ui-cluster-')),
      env: process.env,
    });
    let options = clusterOptions();
    cleanups.push(() => stopCluster(options));
    // One retry, as the integration setup does: a start can time out on a loaded machine.
    const cluster = await startCluster(options).catch(() => {
      options = clusterOptions();
      return startCluster(options);
    });
    const admin = loadKubeConfig(cluster.kubeconfigPath);
    const core = admin.makeApiClient(CoreV1Api);
    namespace = (await createTestNamespace(admin, 'consoles-ui')).name;

    // kwok runs the consoles' commands here, as user 65534 in a directory it may enter.
    const workDir = join(dir, 'exec');
    mkdirSync(workDir);
    chmodSync(dir, 0o755);
    chmodSync(workDir, 0o755);
    await serveExecLocally(admin, { namespace, workDir });
    // One log line per pod, so the collector reports both and the page offers them.
    const logFile = join(dir, 'pods.log');
    writeFileSync(logFile, criLine(new Date(), 'console target ready'));
    await serveLogsFromFile(admin, { namespace, logsFile: logFile });
    // console-target is inside exec.pod.rules (names: console-*); outside-rules is not.
    for (const name of ['console-target', 'outside-rules']) {
      await core.createNamespacedPod({
        namespace,
        body: {
          metadata: { name },
          spec: { containers: [{ name: 'main', image: 'registry.invalid/shell:1' }] },
        },
      });
    }
    await eventually(
      'both pods running',
      async () => {
        const pods = await core.listNamespacedPod({ namespace });
        return pods.items.filter((p) => p.status?.phase === 'Running').length === 2
          ? true
          : undefined;
      },
      { timeoutMs: 90_000, intervalMs: 500 },
    );

    const gateway = new DemoGateway({ acceptToken: TOKEN }, { logger: pino({ level: 'silent' }) });
    cleanups.push(() => gateway.close());
    const port = await gateway.listen('127.0.0.1', 0);
    const executor: RunningExecutor = await startTestExecutor({
      kube: await serviceAccountIdentity(admin, namespace, 'executor', true),
      namespace,
      commandKey: {
        id: gateway.commandSigner.keyId,
        publicKeyPem: gateway.commandSigner.publicKeyPem,
      },
    });
    cleanups.push(() => executor.close());
    // kwok picks up a new ClusterExec asynchronously: until a command runs through it (as the
    // admin, straight to the API server: no console, no audit record).
    const exec = new Exec(admin);
    await eventually(
      "kwok's exec serving the namespace",
      () =>
        new Promise<true | undefined>((resolve) => {
          void exec
            // At least one stream: the API server refuses an exec with none.
            .exec(
              namespace,
              'console-target',
              'main',
              ['true'],
              new PassThrough(),
              null,
              null,
              false,
              (s) => {
                resolve(s.status === 'Success' ? true : undefined);
              },
            )
            .then((socket) => {
              socket.on('close', () => {
                resolve(undefined);
              });
            })
            .catch(() => {
              resolve(undefined);
            });
        }),
      { timeoutMs: 30_000, intervalMs: 500 },
    );
    writeFileSync(
      join(dir, 'collector.yaml'),
      [
        'gateway:',
        `  address: 127.0.0.1:${String(port)}`,
        '  tls: false',
        '  reconnect_initial_delay: 200ms',
        '  reconnect_max_delay: 1s',
        'buffer:',
        `  spill_dir: ${JSON.stringify(join(dir, 'data'))}`,
        'collect:',
        '  logs:',
        '    rules:',
        '      - id: consoles-ui',
        `        namespace: ${namespace}`,
        'observability:',
        '  health_addr: "127.0.0.1:0"',
        '  metrics_addr: "127.0.0.1:0"',
        '',
      ].join('\n'),
    );
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      KUBECONFIG: cluster.kubeconfigPath,
      KUBEXA_TENANT_TOKEN: TOKEN,
      KUBEXA_EXECUTOR_SOCKET: executor.socketPath,
    };
    delete env['KUBERNETES_SERVICE_HOST'];
    const collector: ChildProcess = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        join(root, 'collector', 'main.ts'),
        `--config=${join(dir, 'collector.yaml')}`,
      ],
      { cwd: root, env, stdio: ['ignore', 'ignore', 'inherit'] },
    );
    cleanups.push(async () => {
      if (collector.exitCode !== null || collector.signalCode !== null) return;
      const exited = once(collector, 'exit');
      collector.kill('SIGKILL');
      await exited;
    });
    await gateway.waitForSession((s) => s.state === 'connected');
    ({ url, page } = await openDemoPage(gateway, cleanups, {
      viewport: { width: 1400, height: 1000 },
    }));
  }, 400_000);

  afterAll(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
    // The screenshots stay (see the header); the rest of the temp directory goes.
    for (const name of ['exec', 'data', 'pods.log', 'collector.yaml']) {
      rmSync(join(dir, name), { recursive: true, force: true });
    }
  });

  it('types a command into the terminal and reads its output from the page', async () => {
    await openConsoleOn('console-target');
    await page.locator('.console-state.state-open').waitFor({ timeout: UI_WAIT_MS });
    await page.locator('.console-terminal .xterm').click();
    await typeLine('echo typed-in-$((6*7))');
    // The output line alone (the echoed command line reads typed-in-$((6*7))).
    await waitForScreen(/^typed-in-42$/m);
    await shot('console-typed');
  });

  it('the process has the size the page shows, and a resized window reaches it (stty size)', async () => {
    const terminal = page.locator('.console-terminal');
    /** rows and columns of xterm.js on the page, as `stty size` prints them. */
    const shown = async () =>
      `${(await terminal.getAttribute('data-rows')) ?? '?'} ${(await terminal.getAttribute('data-cols')) ?? '?'}`;
    const before = await shown();
    await typeLine('echo size-before=$(stty size)');
    const printed = /^size-before=(\d+ \d+)$/m.exec(await waitForScreen(/^size-before=\d+ \d+$/m));
    // The page sized its terminal before the agent's call arrived: the gateway kept that size.
    expect(printed?.[1]).toBe(before);
    // The terminal fills the page's width (its height is fixed): a narrower window, fewer columns.
    await page.setViewportSize({ width: 800, height: 1000 });
    await expect.poll(shown, { timeout: UI_WAIT_MS }).not.toBe(before);
    const after = await shown();
    expect(Number(after.split(' ')[1])).toBeLessThan(Number(before.split(' ')[1]));
    await typeLine('echo size-after=$(stty size)');
    const resized = /^size-after=(\d+ \d+)$/m.exec(await waitForScreen(/^size-after=\d+ \d+$/m));
    expect(resized?.[1]).toBe(after);
    await shot('console-resized');
  });

  it('shows the end of the session and lists the open and close audit records', async () => {
    await typeLine('exit 5');
    // kwok's exec reports no exit code for a TTY command (a real kubelet does: -1 here, 5 in
    // test/node/console-through-gateway.test.ts); the page shows that the process ended.
    const exit = page.locator('.console-exit');
    await exit.waitFor({ timeout: UI_WAIT_MS });
    expect(await exit.innerText()).toContain('ended (exited)');
    const target = `pod/${namespace}/console-target/main`;
    const open = page.locator('.console-audits tr.audit-console_open', { hasText: target });
    const close = page.locator('.console-audits tr.audit-console_close', { hasText: target });
    await close.first().waitFor({ timeout: UI_WAIT_MS });
    await open.first().waitFor({ timeout: UI_WAIT_MS });
    expect(await close.count()).toBe(1);
    expect(await open.count()).toBe(1);
    expect(await close.innerText()).toContain('exited (');
    expect(await open.innerText()).toContain('demo-user@example.com');
    await shot('console-audits');
  });

  it('shows a refused open with its code and reason (a pod outside exec.pod.rules)', async () => {
    await page.setViewportSize({ width: 1400, height: 1000 });
    await openConsoleOn('outside-rules');
    const refusal = page.locator('.console-refusal');
    await refusal.waitFor({ timeout: UI_WAIT_MS });
    expect(await refusal.locator('.refusal-code').innerText()).toBe('POLICY_DENIED');
    expect(await refusal.innerText()).toMatch(/outside-rules/);
    // The refusal is audited too, with its code.
    await page
      .locator('.console-audits tr.audit-console_refusal', { hasText: 'POLICY_DENIED' })
      .first()
      .waitFor({ timeout: UI_WAIT_MS });
    await shot('console-refused');
  });
});
