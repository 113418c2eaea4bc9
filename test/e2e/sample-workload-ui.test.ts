// The Logs view in headless Chromium on the demo's REAL sample workload: a test cluster of its
// own (the e2e project has none), the sample workload of `npm run demo` on it
// (scripts/demo-workload.ts: Deployments in two namespaces whose kwok containers write access
// logs, JSON logs with levels and a Python stack trace every 20 s), the real collector process
// (collector/main.ts) reading those logs through the API server and streaming them to the demo
// gateway, and the page on the gateway's HTTP server. Nothing here is hand-made: every row is a
// line the collector read, joined and levelled. Screenshots are left in test-results/demo-ui/.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { Page } from 'playwright-core';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DemoGateway } from '../../demo-gateway/demo-gateway.js';
import { ensureUiBuilt } from '../../demo-gateway/ui-build.js';
import { startSampleWorkload, TRACEBACK } from '../../scripts/demo-workload.js';
import { startCluster, stopCluster, type ClusterOptions } from '../cluster/cluster.js';
import { openDemoPage, requireChromium } from '../helpers/demo-page.js';
import { loadKubeConfig } from '../helpers/kube.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const ARTIFACTS = join(root, 'test-results', 'demo-ui');
const TOKEN = 'sample-workload-ui-token-0123456789';
/**
 * Generous waits on states, never sleeps: a collector process start, pods to run and the first
 * stack trace (20 s into the workload) on two loaded cores.
 */
const FIRST_ROWS_MS = 120_000;
const TRACE_MS = 90_000;
const UI_WAIT_MS = 45_000;
const ERROR_RED = 'rgb(209, 47, 60)';

const TRACE_HEAD = 'Traceback (most recent call last):';
const TRACE_TAIL = TRACEBACK[TRACEBACK.length - 1] ?? '';

describe('the Logs view on the real sample workload, in headless Chromium', () => {
  let page: Page;
  let url: string;
  let stopUi: () => Promise<void>;
  let stopGateway: () => Promise<void>;
  const collectorOutput: string[] = [];
  const cleanups: (() => unknown)[] = [];

  const shot = async (name: string) => {
    mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: join(ARTIFACTS, `${name}.png`) });
  };
  // Page code as strings: this file is typed for Node, not the DOM.
  const rowData = (key: 'namespace' | 'level'): Promise<string[]> =>
    page.evaluate(
      `[...document.querySelectorAll('#log-table tr.log-row')].map((r) => r.dataset.${key})`,
    );
  const background = (selector: string): Promise<string> =>
    page.evaluate(
      `getComputedStyle(document.querySelector(${JSON.stringify(selector)})).backgroundColor`,
    );
  /** Waits until the table has rows and every one matches `match` (a filter's own answer). */
  const waitForOnly = async (match: Partial<Record<'namespace' | 'level', string>>) => {
    await page.waitForFunction(
      `(() => {
        const rows = [...document.querySelectorAll('#log-table tr.log-row')];
        const expected = ${JSON.stringify(match)};
        return rows.length > 0 &&
          rows.every((row) => Object.entries(expected).every(([key, value]) => row.dataset[key] === value));
      })()`,
      undefined,
      { timeout: UI_WAIT_MS },
    );
  };

  beforeAll(async () => {
    requireChromium();
    await ensureUiBuilt();
    const options: ClusterOptions = {
      name: `kubexa-sample-ui-${String(process.pid)}`,
      workdir: mkdtempSync(join(tmpdir(), 'kubexa-sample-ui-')),
      env: process.env,
    };
    cleanups.push(() => stopCluster(options));
    const cluster = await startCluster(options);
    const dir = mkdtempSync(join(tmpdir(), 'kubexa-sample-ui-files-'));
    cleanups.push(() => {
      rmSync(dir, { recursive: true, force: true });
    });

    // The demo's gateway, as scripts/demo.ts makes it (token checked, events accepted).
    const gateway = new DemoGateway(
      { acceptToken: TOKEN, acceptedPayloads: ['pod_lifecycle', 'kube_event'] },
      { logger: pino({ level: 'silent' }) },
    );
    const grpcPort = await gateway.listen('127.0.0.1', 0);
    let gatewayClosed: Promise<void> | undefined;
    stopGateway = () => (gatewayClosed ??= gateway.close());
    cleanups.push(() => stopGateway());

    const workload = await startSampleWorkload(loadKubeConfig(cluster.kubeconfigPath), dir);
    cleanups.push(() => {
      workload.stop();
    });

    // The real collector process; logs only, the rest is not what this test is about.
    const configPath = join(dir, 'collector.yaml');
    writeFileSync(
      configPath,
      [
        'gateway:',
        `  address: 127.0.0.1:${String(grpcPort)}`,
        '  tls: false',
        '  reconnect_initial_delay: 500ms',
        'buffer:',
        `  spill_dir: ${JSON.stringify(join(dir, 'spill'))}`,
        'observability:',
        '  health_addr: "127.0.0.1:0"',
        '  metrics_addr: "127.0.0.1:0"',
        'collect:',
        '  state: { enabled: false }',
        '  events: { enabled: false }',
        '',
      ].join('\n'),
    );
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      KUBECONFIG: cluster.kubeconfigPath,
      KUBEXA_TENANT_TOKEN: TOKEN,
    };
    delete env['KUBERNETES_SERVICE_HOST'];
    delete env['KUBEXA_AGENT_ID'];
    delete env['KUBEXA_EXECUTOR_SOCKET'];
    const collector = spawn(
      process.execPath,
      ['--import', 'tsx', join(root, 'collector', 'main.ts'), `--config=${configPath}`],
      { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    const exited = once(collector, 'exit');
    createInterface({ input: collector.stdout }).on('line', (line) => collectorOutput.push(line));
    collector.stderr.on('data', (chunk: Buffer) => collectorOutput.push(chunk.toString()));
    cleanups.push(async () => {
      if (collector.exitCode !== null || collector.signalCode !== null) return;
      collector.kill('SIGTERM');
      await exited;
    });
    await Promise.race([
      gateway.waitForSession(),
      exited.then(() => {
        throw new Error(`the collector exited before connecting:\n${collectorOutput.join('\n')}`);
      }),
    ]);

    ({ url, page, stopUi } = await openDemoPage(gateway, cleanups));
  }, 300_000);

  afterAll(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
  });

  it('shows both namespaces with an error line coloured as an error', async () => {
    await page.goto(`${url}/#/logs`);
    await page.locator('#connection[data-state="connected"]').waitFor({ timeout: UI_WAIT_MS });
    // The api's JSON error line (every 53 ticks of 250 ms) and rows from both namespaces.
    const error = page.locator('#log-table tr.log-row[data-level="error"]', {
      hasText: 'checkout failed: payments upstream returned 503',
    });
    await error.first().waitFor({ timeout: FIRST_ROWS_MS });
    await page
      .locator('#log-table tr.log-row[data-namespace="demo-payments"]')
      .first()
      .waitFor({ timeout: UI_WAIT_MS });
    expect(new Set(await rowData('namespace'))).toEqual(new Set(['demo-shop', 'demo-payments']));

    // A red level badge for the error, another colour for an info line.
    const badge = await background(
      '#log-table tr.log-row[data-level="error"][data-namespace="demo-shop"] .level',
    );
    expect(badge).toBe(ERROR_RED);
    await page
      .locator('#log-table tr.log-row[data-level="info"]')
      .first()
      .waitFor({ timeout: UI_WAIT_MS });
    expect(await background('#log-table tr.log-row[data-level="info"] .level')).not.toBe(badge);
    // The header names what it counts: containers with lines, not every container followed.
    expect(await page.locator('[data-field="followed"]').textContent()).toMatch(
      /^\d+ containers? with lines in the last 5 min/,
    );
    await shot('sample-workload-logs');
  });

  it('narrows the rows by namespace, shows the stack trace as one expandable record, and narrows by level', async () => {
    await page.locator('select[data-filter="namespace"]').selectOption('demo-payments');
    await waitForOnly({ namespace: 'demo-payments' });
    expect(new Set(await rowData('namespace'))).toEqual(new Set(['demo-payments']));

    // The ledger's Python stack trace (every 20 s, written as a runtime writes it: one line
    // after another) is one row of six lines, not six rows.
    const trace = page.locator('#log-table tr.log-row', { hasText: TRACE_HEAD });
    await trace.first().waitFor({ timeout: TRACE_MS });
    expect(await trace.first().getAttribute('data-lines')).toBe('6');
    for (const line of [TRACE_TAIL, 'File "', 'raise InsufficientFunds']) {
      expect(
        await page.locator('#log-table tr.log-row .message-text', { hasText: line }).count(),
      ).toBe(0);
    }
    await shot('sample-workload-namespace');

    // Paused, so the rows stay where they are while it is expanded.
    await page.locator('#follow-toggle[data-mode="follow"]').click();
    await page.locator('#follow-toggle[data-mode="paused"]').waitFor({ timeout: UI_WAIT_MS });
    await trace.first().locator('.chip-lines', { hasText: '+5 lines' }).click();
    const details = page.locator('#log-table tr.log-details pre.raw').first();
    await details.waitFor({ timeout: UI_WAIT_MS });
    expect(await details.textContent()).toBe(TRACEBACK.slice(1).join('\n'));
    await shot('sample-workload-stack-trace');
    await page.locator('#follow-toggle[data-mode="paused"]').click();
    await page.locator('#follow-toggle[data-mode="follow"]').waitFor({ timeout: UI_WAIT_MS });

    // Errors only, across both namespaces: the api's JSON errors and the ledger's ERROR lines.
    await page.locator('select[data-filter="namespace"]').selectOption('');
    await page.locator('select[data-filter="level"]').selectOption('error');
    await waitForOnly({ level: 'error' });
    expect(new Set(await rowData('level'))).toEqual(new Set(['error']));
    await page
      .locator('#log-table tr.log-row[data-namespace="demo-payments"]', {
        hasText: 'ERROR settlement batch failed',
      })
      .first()
      .waitFor({ timeout: UI_WAIT_MS });
    expect(new Set(await rowData('namespace'))).toEqual(new Set(['demo-shop', 'demo-payments']));
    await shot('sample-workload-errors');

    // Both: the ledger's errors only.
    await page.locator('select[data-filter="namespace"]').selectOption('demo-payments');
    await waitForOnly({ namespace: 'demo-payments', level: 'error' });
  });
  it('keeps the rows still while paused as the workload writes on, and adds its lines on resume', async () => {
    await page.locator('select[data-filter="namespace"]').selectOption('');
    await page.locator('select[data-filter="level"]').selectOption('');
    await page.locator('#log-table tr.log-row').first().waitFor({ timeout: UI_WAIT_MS });
    await page.locator('#follow-toggle[data-mode="follow"]').click();
    await page.locator('#follow-toggle[data-mode="paused"]').waitFor({ timeout: UI_WAIT_MS });
    const rows = page.locator('#log-table tr.log-row');
    const textsBefore = await rows.allTextContents();
    const firstBox = await rows.first().boundingBox();
    // The workload writes about 15 lines a second: the Resume button counts them arriving.
    await page.waitForFunction(
      `Number(document.querySelector('#follow-toggle[data-mode="paused"]')?.dataset.pending ?? 0) >= 5`,
      undefined,
      { timeout: FIRST_ROWS_MS },
    );
    expect(await rows.allTextContents()).toEqual(textsBefore);
    expect(await rows.first().boundingBox()).toEqual(firstBox);
    await shot('sample-workload-paused');
    await page.locator('#follow-toggle[data-mode="paused"]').click();
    await page.locator('#follow-toggle[data-mode="follow"]').waitFor({ timeout: UI_WAIT_MS });
    // The newest row is one that arrived while paused (the table keeps at most 2,000 rows, so
    // the count alone could stay put).
    await page.waitForFunction(
      `[...document.querySelectorAll('#log-table tr.log-row')].at(-1)?.textContent !== ${JSON.stringify(textsBefore.at(-1) ?? '')}`,
      undefined,
      { timeout: UI_WAIT_MS },
    );
  });

  it('turns the banner red once the gateway stops, and keeps the rows the reader had', async () => {
    await page.locator('#connection[data-state="connected"]').waitFor({ timeout: UI_WAIT_MS });
    const rowsBefore = await page.locator('#log-table tr.log-row').count();
    expect(rowsBefore).toBeGreaterThan(0);
    await stopUi();
    await stopGateway();
    const banner = page.locator('#connection[data-state="unreachable"]');
    await banner.waitFor({ timeout: UI_WAIT_MS });
    expect(await background('#connection')).toBe(ERROR_RED);
    expect(await banner.textContent()).toContain('Gateway unreachable');
    expect(await page.locator('#log-table tr.log-row').count()).toBeGreaterThan(0);
    await shot('sample-workload-gateway-down');
  });
});
