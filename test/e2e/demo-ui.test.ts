// The demo gateway's web UI (the Vite-built Preact front-end) in a real headless Chromium
// (Debian's `chromium`, driven by playwright-core). Sample data travels the real path: a real
// GatewayStream with a real DurableBuffer streams LogBatches over gRPC on loopback into the demo
// gateway, which stores one row per record in SQLite; the page reads it over HTTP. Screenshots
// of each view are left in test-results/demo-ui/.
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BufferItem } from '../../collector/buffer/types.js';
import { ensureUiBuilt } from '../../demo-gateway/ui-build.js';
import { createWebUi } from '../../demo-gateway/web-ui.js';
import { AgentMessage, ConfigSnapshot, LogBatch, LogEntry, LogLevel } from '../../proto/index.js';
import {
  startHarness,
  TEST_AGENT,
  TEST_CLUSTER,
  until,
  type Harness,
} from '../helpers/gateway-harness.js';

/** Debian's package; KUBEXA_CHROMIUM points elsewhere (another distribution, a local build). */
const CHROMIUM = process.env['KUBEXA_CHROMIUM'] ?? '/usr/bin/chromium';
const ARTIFACTS = join(import.meta.dirname, '..', '..', 'test-results', 'demo-ui');
/**
 * The gateway tells the agent to heartbeat every 5 s (the agent's minimum), on the agent's fake
 * clock: heartbeats come only when the test advances it, so the page sees them stop.
 */
const HEARTBEAT_S = 5;
/** How long a locator may wait for the page (it polls every second). */
const UI_WAIT_MS = 20_000;

const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

interface SampleLine {
  readonly namespace: string;
  readonly workload: string;
  readonly pod: string;
  readonly container: string;
  readonly level: LogLevel;
  readonly raw: string;
  readonly truncated?: boolean;
}

const WEB = { namespace: 'shop', workload: 'web', pod: 'web-7d9f8-abcde', container: 'nginx' };
const API = { namespace: 'shop', workload: 'api', pod: 'api-5c8b6-xyz12', container: 'api' };
const PAY = {
  namespace: 'payments',
  workload: 'ledger',
  pod: 'ledger-66f4d-k2p9q',
  container: 'worker',
};

const STACK_TRACE = [
  'Traceback (most recent call last):',
  '  File "/app/ledger/settle.py", line 88, in settle_batch',
  '    entry = self.book.post(txn)',
  '  File "/app/ledger/book.py", line 41, in post',
  '    raise InsufficientFunds(account, txn.amount)',
  'ledger.errors.InsufficientFunds: account acct-2231 balance 12.40 < 99.00',
].join('\n');

let sent = 0;
const base = Date.now() - 60_000;

/** One LogBatch buffer item, the way the collector's pod log source makes them. */
function batch(lines: readonly SampleLine[]): BufferItem {
  const id = `logs-${String(++sent).padStart(5, '0')}`;
  const entries = lines.map((line, i) =>
    LogEntry.fromPartial({
      namespace: line.namespace,
      podName: line.pod,
      container: line.container,
      workload: line.workload,
      workloadKind: 'Deployment',
      nodeName: 'kwok-node-0',
      timestamp: String(BigInt(base + sent * 1000 + i) * 1_000_000n),
      message: line.raw.split('\n')[0] ?? '',
      raw: Buffer.from(line.raw),
      level: line.level,
      truncated: line.truncated ?? false,
    }),
  );
  const message: AgentMessage = {
    messageId: id,
    payload: { $case: 'logs', value: LogBatch.fromPartial({ entries }) },
  };
  return { id, kind: 'log', payload: AgentMessage.encode(message).finish() };
}

const access = (n: number, status = 200): SampleLine => ({
  ...WEB,
  level: LogLevel.LOG_LEVEL_UNSPECIFIED,
  raw: `10.0.3.${n % 250} - - [01/Dec/2026:00:0${n % 10}:12 +0000] "GET /cart/${n} HTTP/1.1" ${status} ${512 + n} "-" "Mozilla/5.0"`,
});
const json = (level: 'info' | 'warn' | 'error', msg: string): SampleLine => ({
  ...API,
  level:
    level === 'error'
      ? LogLevel.LOG_LEVEL_ERROR
      : level === 'warn'
        ? LogLevel.LOG_LEVEL_WARN
        : LogLevel.LOG_LEVEL_INFO,
  raw: JSON.stringify({ level, msg, route: '/api/checkout', ms: 42 }),
});

describe('demo gateway web UI in headless Chromium', () => {
  let harness: Harness;
  let page: Page;
  let url: string;
  let closeUi: () => Promise<void>;
  /** Undone in reverse order, whatever part of the setup succeeded. */
  const cleanups: (() => PromiseLike<void> | void)[] = [];

  async function shot(name: string): Promise<void> {
    mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: join(ARTIFACTS, `${name}.png`) });
  }

  async function sendAndStore(lines: readonly SampleLine[]): Promise<void> {
    const before = harness.gateway.store.logs.stats(Date.now()).totalLines;
    harness.buffer.enqueue(batch(lines));
    await until(
      () => harness.gateway.store.logs.stats(Date.now()).totalLines >= before + lines.length,
      'the gateway to store the lines',
    );
  }

  // Page code as strings: this file is typed for Node, not the DOM.
  const background = (selector: string): Promise<string> =>
    page.evaluate(
      `getComputedStyle(document.querySelector(${JSON.stringify(selector)})).backgroundColor`,
    );
  const rowData = (key: 'namespace' | 'level'): Promise<string[]> =>
    page.evaluate(
      `[...document.querySelectorAll('#log-table tr.log-row')].map((r) => r.dataset.${key})`,
    );

  /**
   * Waits until the table shows exactly `count` rows, each matching `match`. A count alone is
   * not enough: the rows of the previous filter can have the same count while the new answer
   * is still on its way (the level filter once read the payments rows, then the unfiltered ones).
   */
  const waitForRows = async (
    count: number,
    match: Partial<Record<'namespace' | 'level', string>>,
  ): Promise<void> => {
    await page.waitForFunction(
      `(() => {
        const rows = [...document.querySelectorAll('#log-table tr.log-row')];
        const expected = ${JSON.stringify(match)};
        return rows.length === ${count} &&
          rows.every((row) => Object.entries(expected).every(([key, value]) => row.dataset[key] === value));
      })()`,
      undefined,
      { timeout: UI_WAIT_MS },
    );
  };

  const rowCount = (selector = '#log-table tr.log-row'): Promise<number> =>
    page.locator(selector).count();

  beforeAll(async () => {
    if (!existsSync(CHROMIUM)) {
      throw new Error(
        `no Chromium at ${CHROMIUM}: install it (Debian: apt-get install chromium) or set KUBEXA_CHROMIUM`,
      );
    }
    await ensureUiBuilt();
    harness = await startHarness({
      gateway: {
        initialConfig: ConfigSnapshot.fromPartial({ heartbeatIntervalSec: HEARTBEAT_S }),
      },
    });
    const started = harness;
    cleanups.push(() => started[Symbol.asyncDispose]());
    const ui = createWebUi(harness.gateway);
    let uiClosed: Promise<void> | undefined;
    closeUi = () => (uiClosed ??= ui.close());
    cleanups.push(() => closeUi());
    url = await ui.listen({ host: '127.0.0.1', port: 0 });
    // A new, empty profile for every run.
    const profile = mkdtempSync(join(tmpdir(), 'kubexa-chromium-'));
    cleanups.push(() => {
      rmSync(profile, { recursive: true, force: true });
    });
    const context: BrowserContext = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      args: CHROMIUM_ARGS,
      viewport: { width: 1500, height: 900 },
      timezoneId: 'UTC',
    });
    cleanups.push(() => context.close());
    page = context.pages()[0] ?? (await context.newPage());

    await harness.gateway.waitForSession();
    await sendAndStore([access(1), access(2), json('info', 'checkout started'), access(3)]);
    await sendAndStore([
      { ...PAY, level: LogLevel.LOG_LEVEL_INFO, raw: 'settling batch 2231 (14 entries)' },
      { ...PAY, level: LogLevel.LOG_LEVEL_ERROR, raw: STACK_TRACE },
      json('warn', 'payment provider slow: 1800 ms'),
      json('error', 'checkout failed: upstream payments returned 503'),
      access(4, 502),
      {
        ...API,
        level: LogLevel.LOG_LEVEL_INFO,
        raw: `big body ${'x'.repeat(300)}`,
        truncated: true,
      },
    ]);
  });

  afterAll(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
  });

  it('shows one row per record with its time, coloured level and columns; a stack trace is one expandable record', async () => {
    await page.goto(`${url}/#/logs`);
    await page.locator('#connection[data-state="connected"]').waitFor({ timeout: UI_WAIT_MS });
    await page.locator('#log-table[data-rows="10"]').waitFor({ timeout: UI_WAIT_MS });
    await page.evaluate('window.__kubexaNoReload = true');

    // The stack trace: one row, its first line shown, "+5 lines" to expand it.
    const trace = page.locator('#log-table tr.log-row[data-lines="6"]');
    expect(await trace.count()).toBe(1);
    expect(await trace.locator('.message-text').textContent()).toBe(
      'Traceback (most recent call last):',
    );
    expect(await trace.locator('td').nth(3).textContent()).toBe('payments');
    expect(await trace.locator('td').nth(4).textContent()).toBe('ledger');
    expect(await trace.locator('td').nth(5).textContent()).toBe('ledger-66f4d-k2p9q');
    expect(await trace.locator('td').nth(6).textContent()).toBe('worker');
    // The log's own time (24-hour, milliseconds), not the time it was received.
    expect(await trace.locator('td.time').textContent()).toMatch(/^\d\d:\d\d:\d\d\.\d{3}$/);
    await trace.locator('.chip-lines', { hasText: '+5 lines' }).click();
    const details = page.locator('#log-table tr.log-details pre.raw');
    await details.waitFor({ timeout: UI_WAIT_MS });
    expect(await details.textContent()).toBe(STACK_TRACE);

    // An error line is coloured: a red level badge and a tinted row.
    const error = page.locator('#log-table tr.log-row[data-level="error"]', {
      hasText: 'checkout failed',
    });
    await error.waitFor({ timeout: UI_WAIT_MS });
    const badge = await background('#log-table tr.log-row[data-level="error"] .level');
    expect(badge).toBe('rgb(209, 47, 60)');
    expect(await background('#log-table tr.log-row[data-level="info"] .level')).not.toBe(badge);
    // A truncated line is marked.
    expect(
      await page
        .locator('#log-table tr.log-row', { hasText: 'big body' })
        .locator('.chip-truncated')
        .count(),
    ).toBe(1);
    await shot('logs');
    expect(await page.evaluate('window.__kubexaNoReload === true')).toBe(true);
  });

  it('narrows the rows by namespace and by level, on the server', async () => {
    const all = await rowCount();
    await page.locator('select[data-filter="namespace"]').selectOption('payments');
    await waitForRows(2, { namespace: 'payments' });
    const namespaces = await rowData('namespace');
    expect(namespaces).toEqual(['payments', 'payments']);
    expect(all).toBeGreaterThan(2);

    await page.locator('select[data-filter="namespace"]').selectOption('');
    await page.locator('select[data-filter="level"]').selectOption('error');
    await waitForRows(2, { level: 'error' });
    const levels = await rowData('level');
    expect(levels).toEqual(['error', 'error']);
    await shot('logs-filtered-error');

    // Both: only the error of the payments namespace, the stack trace.
    await page.locator('select[data-filter="namespace"]').selectOption('payments');
    await waitForRows(1, { namespace: 'payments', level: 'error' });
    expect(await page.locator('#log-table tr.log-row').getAttribute('data-lines')).toBe('6');

    // A new matching line arrives live while filtered; a non-matching one does not.
    await sendAndStore([
      { ...PAY, level: LogLevel.LOG_LEVEL_ERROR, raw: 'ledger write failed: disk quota exceeded' },
      { ...PAY, level: LogLevel.LOG_LEVEL_INFO, raw: 'ledger heartbeat ok' },
    ]);
    await page
      .locator('#log-table tr.log-row', { hasText: 'disk quota exceeded' })
      .waitFor({ timeout: UI_WAIT_MS });
    expect(await rowCount()).toBe(2);

    await page.getByRole('button', { name: 'Clear' }).click();
    await page.locator('#log-table[data-rows="12"]').waitFor({ timeout: UI_WAIT_MS });
  });

  it('keeps rows still while paused, a text selection included, and adds the new lines on resume', async () => {
    await page.locator('#follow-toggle[data-mode="follow"]').click();
    await page.locator('#follow-toggle[data-mode="paused"]').waitFor({ timeout: UI_WAIT_MS });
    const rows = page.locator('#log-table tr.log-row');
    const textsBefore = await rows.allTextContents();
    const firstBox = await rows.first().boundingBox();
    // The reader selects a line's text.
    await page.evaluate(`(() => {
      const cell = document.querySelector('#log-table tr.log-row .message-text');
      const range = document.createRange();
      range.selectNodeContents(cell);
      const selection = window.getSelection();
      selection.removeAllRanges();
      selection.addRange(range);
    })()`);
    const selected = await page.evaluate('window.getSelection().toString()');
    expect(selected).not.toBe('');

    await sendAndStore([access(5), access(6), json('info', 'cart updated')]);
    // The page saw them (the Resume button counts them) but the rows did not move.
    await page
      .locator('#follow-toggle[data-mode="paused"][data-pending="3"]')
      .waitFor({ timeout: UI_WAIT_MS });
    expect(await rows.allTextContents()).toEqual(textsBefore);
    expect(await rows.first().boundingBox()).toEqual(firstBox);
    expect(await page.evaluate('window.getSelection().toString()')).toBe(selected);
    await shot('logs-paused');

    await page.locator('#follow-toggle[data-mode="paused"]').click();
    await page.locator('#log-table tr.log-row', { hasText: 'cart updated' }).waitFor({
      timeout: UI_WAIT_MS,
    });
    expect(await rowCount()).toBe(textsBefore.length + 3);
    await page.evaluate('window.getSelection().removeAllRanges()');
  });

  it('shows the agent session, its stale marker when heartbeats stop, and control actions with their state and timeline', async () => {
    const session = await harness.gateway.waitForSession();
    await page.goto(`${url}/#/agents`);
    const row = page.locator(`#sessions tr[data-session-id="${session.sessionId}"]`);
    await row.waitFor({ timeout: UI_WAIT_MS });
    expect(await row.textContent()).toContain(TEST_CLUSTER);
    expect(await row.textContent()).toContain(TEST_AGENT);
    expect(await row.textContent()).toContain(session.sessionId);

    // No heartbeat for 2.5 intervals (the agent's clock is stopped): stale.
    await row.locator('.state-stale').waitFor({ timeout: UI_WAIT_MS });
    // A heartbeat: connected again, its health shown.
    harness.clock.advance(HEARTBEAT_S * 1000);
    await row.locator('.state-connected').waitFor({ timeout: UI_WAIT_MS });
    await row.locator('.status-healthy', { hasText: 'queue 0' }).waitFor({ timeout: UI_WAIT_MS });

    // Throttle: the Backpressure signal reaches the agent; the page shows the state it is in.
    const actions = page.locator(`tr[data-actions-for="${session.sessionId}"]`);
    const throttle = actions.getByRole('button', { name: 'Throttle', exact: true });
    expect(await throttle.getAttribute('title')).toMatch(/BackpressureSignal.*2000 ms/);
    await throttle.click();
    await until(
      () =>
        harness.logs.lines.some(
          (l) =>
            l.msg === 'gateway backpressure' && l['throttle'] === true && l['delayMs'] === 2000,
        ),
      'the agent to log the backpressure signal',
    );
    await actions
      .locator('[data-field="throttle"]', { hasText: /throttled since \d\d:\d\d:\d\d, 2000 ms/ })
      .waitFor({ timeout: UI_WAIT_MS });
    await page
      .locator('.timeline li[data-kind="backpressure"]', { hasText: 'throttle: wait 2000 ms' })
      .waitFor({ timeout: UI_WAIT_MS });
    expect(await page.locator('.timeline li[data-kind="handshake"]').count()).toBe(1);
    harness.clock.advance(HEARTBEAT_S * 1000);
    await row.locator('.status-degraded').waitFor({ timeout: UI_WAIT_MS });
    await shot('agents');

    await actions.getByRole('button', { name: 'Unthrottle' }).click();
    await until(
      () =>
        harness.logs.lines.some((l) => l.msg === 'gateway backpressure' && l['throttle'] === false),
      'the agent to log the end of backpressure',
    );
    await actions
      .getByRole('button', { name: 'Throttle', exact: true })
      .waitFor({ timeout: UI_WAIT_MS });
    expect(await actions.locator('[data-field="throttle"]').count()).toBe(0);

    // Every view of the navigation has its component now: none shows the "coming" placeholder.
    for (const id of ['state', 'events', 'metrics', 'query', 'consoles', 'nodes']) {
      await page.locator(`nav a[data-view="${id}"]`).click();
      await page.locator(`.content[data-current-view="${id}"]`).waitFor({ timeout: UI_WAIT_MS });
      expect(await page.locator('.view.placeholder').count()).toBe(0);
    }
    expect(await page.locator('nav .nav-soon').count()).toBe(0);
    await shot('nodes-from-navigation');
  });

  it('turns the banner red when the gateway stops answering', async () => {
    await page.goto(`${url}/#/logs`);
    await page.locator('#connection[data-state="connected"]').waitFor({ timeout: UI_WAIT_MS });
    // The page's first fetch of rows must have landed before the gateway goes away.
    await page.locator('#log-table tr.log-row').first().waitFor({ timeout: UI_WAIT_MS });
    await closeUi();
    await harness.gateway.close();
    const banner = page.locator('#connection[data-state="unreachable"]');
    await banner.waitFor({ timeout: UI_WAIT_MS });
    expect(await background('#connection')).toBe('rgb(209, 47, 60)');
    expect(await banner.textContent()).toContain('Gateway unreachable');
    // The rows the reader had stay on the page.
    expect(await rowCount()).toBeGreaterThan(0);
    await shot('gateway-down');
  });
});
