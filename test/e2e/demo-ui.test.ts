// The demo gateway's web UI in a real headless Chromium (Debian's `chromium`, driven by
// playwright-core): a real GatewayStream with a real DurableBuffer streams to the demo gateway
// on loopback, and the page must show the agent, its stream health and the data as it arrives,
// and its buttons must reach the agent. A screenshot is left in test-results/demo-ui.png.
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BufferItem } from '../../collector/buffer/types.js';
import { createWebUi } from '../../demo-gateway/web-ui.js';
import {
  AgentMessage,
  EventType,
  LogBatch,
  LogEntry,
  LogLevel,
  StateEvent,
} from '../../proto/index.js';
import {
  startHarness,
  TEST_AGENT,
  TEST_CLUSTER,
  until,
  type Harness,
} from '../helpers/gateway-harness.js';

/** Debian's package; KUBEXA_CHROMIUM points elsewhere (another distribution, a local build). */
const CHROMIUM = process.env['KUBEXA_CHROMIUM'] ?? '/usr/bin/chromium';
const SCREENSHOT = join(import.meta.dirname, '..', '..', 'test-results', 'demo-ui.png');
const HEARTBEAT_MS = 30_000;
/** How long a locator may wait for the page (it polls every second). */
const UI_WAIT_MS = 15_000;

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

function logItem(n: number, message: string): BufferItem {
  const id = `log-${String(n).padStart(5, '0')}`;
  const entry = LogEntry.fromPartial({
    podName: `web-${n}`,
    namespace: 'shop',
    container: 'nginx',
    timestamp: String(BigInt(Date.now()) * 1_000_000n),
    message,
    level: LogLevel.LOG_LEVEL_INFO,
  });
  const payload: AgentMessage = {
    messageId: id,
    payload: { $case: 'logs', value: LogBatch.fromPartial({ entries: [entry] }) },
  };
  return { id, kind: 'log', payload: AgentMessage.encode(payload).finish() };
}

function stateItem(n: number, name: string): BufferItem {
  const id = `state-${String(n).padStart(5, '0')}`;
  const payload: AgentMessage = {
    messageId: id,
    payload: {
      $case: 'state',
      value: StateEvent.fromPartial({
        type: EventType.EVENT_TYPE_ADDED,
        name,
        namespace: 'shop',
        resource: 'pods',
        apiVersion: 'v1',
      }),
    },
  };
  return { id, kind: 'state', payload: AgentMessage.encode(payload).finish() };
}

/** Resolves after the page has polled the gateway `count` more times. */
async function nextRefreshes(page: Page, count: number): Promise<void> {
  const live = page.locator('#live');
  const now = Number(await live.getAttribute('data-refreshes'));
  await page.waitForFunction(
    `Number(document.getElementById('live').dataset.refreshes) >= ${now + count}`,
    undefined,
    { timeout: UI_WAIT_MS },
  );
}

describe('demo gateway web UI in headless Chromium', () => {
  let harness: Harness;
  let page: Page;
  let url: string;
  /** Undone in reverse order, whatever part of the setup succeeded. */
  const cleanups: (() => PromiseLike<void> | void)[] = [];

  beforeAll(async () => {
    if (!existsSync(CHROMIUM)) {
      throw new Error(
        `no Chromium at ${CHROMIUM}: install it (Debian: apt-get install chromium) or set KUBEXA_CHROMIUM`,
      );
    }
    harness = await startHarness({ stream: { heartbeatIntervalMs: HEARTBEAT_MS } });
    const started = harness;
    cleanups.push(() => started[Symbol.asyncDispose]());
    const ui = createWebUi(harness.gateway);
    cleanups.push(() => ui.close());
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
      viewport: { width: 1400, height: 900 },
    });
    cleanups.push(() => context.close());
    page = context.pages()[0] ?? (await context.newPage());
  });

  afterAll(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
  });

  it('shows the connected agent, its stream health and live data, and its buttons reach the agent', async () => {
    const session = await harness.gateway.waitForSession();
    await page.goto(url);
    const row = page.locator(`#sessions tr[data-session-id="${session.sessionId}"]`);
    await row.locator('.state-connected').waitFor({ timeout: UI_WAIT_MS });
    expect(await row.textContent()).toContain(TEST_CLUSTER);
    expect(await row.textContent()).toContain(TEST_AGENT);

    // Anything below that appears without this marker being lost appeared without a reload.
    await page.evaluate('window.__kubexaNoReload = true');

    // Data: two log lines and two state events through the buffer and the stream.
    harness.buffer.enqueue(logItem(1, 'GET /cart 200 in 12ms'));
    harness.buffer.enqueue(stateItem(1, 'web-7d9f-abcde'));
    harness.buffer.enqueue(logItem(2, 'GET /checkout 502 upstream timed out'));
    harness.buffer.enqueue(stateItem(2, 'worker-5c8b-xyz12'));
    await harness.gateway.waitForStored('logs', 2);
    await harness.gateway.waitForStored('state', 2);
    const messages = page.locator('#messages');
    for (const text of [
      'GET /cart 200 in 12ms',
      'GET /checkout 502 upstream timed out',
      'shop/web-7d9f-abcde',
      'shop/worker-5c8b-xyz12',
    ]) {
      await messages.locator('tr', { hasText: text }).waitFor({ timeout: UI_WAIT_MS });
    }
    await page.locator('#totals', { hasText: 'logs: 2' }).waitFor({ timeout: UI_WAIT_MS });
    // Every data message was acked by the gateway and settled in the agent's buffer.
    await until(
      () => harness.buffer.stats().inflight === 0 && harness.buffer.stats().pending === 0,
      'the buffer to settle',
    );

    // Stream health: the agent's next heartbeat (fake clock) shows up in the agent's row.
    harness.clock.advance(HEARTBEAT_MS);
    await row.locator('.status-healthy', { hasText: 'queue 0' }).waitFor({ timeout: UI_WAIT_MS });
    expect(await row.locator('td[data-field="acks"]').textContent()).toBe('on');

    // Refreshes update the row in place: the buttons survive them, so no click is lost to one.
    const throttle = row.getByRole('button', { name: /Throttle/ });
    await page.evaluate(
      `document.querySelector('#sessions tr[data-session-id="${session.sessionId}"] button').dataset.e2eMark = 'kept'`,
    );
    expect(await row.locator('button[data-e2e-mark="kept"]').count()).toBe(1);
    await nextRefreshes(page, 2);
    expect(await row.locator('button[data-e2e-mark="kept"]').count()).toBe(1);

    // Throttle from the page: the Backpressure signal reaches the agent, which reports itself
    // degraded in its next heartbeat, and the page shows that.
    const receivedBefore = harness.stream.status().counters.received;
    await throttle.click();
    await until(
      () =>
        harness.logs.lines.some(
          (l) =>
            l.msg === 'gateway backpressure' && l['throttle'] === true && l['delayMs'] === 2000,
        ),
      'the agent to log the backpressure signal',
    );
    expect(harness.stream.status().counters.received).toBeGreaterThan(receivedBefore);
    harness.clock.advance(HEARTBEAT_MS);
    await row.locator('.status-degraded').waitFor({ timeout: UI_WAIT_MS });

    // Unthrottle: healthy again, and new data keeps arriving live.
    await row.getByRole('button', { name: 'Unthrottle' }).click();
    await until(
      () =>
        harness.logs.lines.some((l) => l.msg === 'gateway backpressure' && l['throttle'] === false),
      'the agent to log the end of backpressure',
    );
    harness.buffer.enqueue(logItem(3, 'GET /cart 200 in 9ms'));
    await messages
      .locator('tr', { hasText: 'GET /cart 200 in 9ms' })
      .waitFor({ timeout: UI_WAIT_MS });
    harness.clock.advance(HEARTBEAT_MS);
    await row.locator('.status-healthy').waitFor({ timeout: UI_WAIT_MS });

    expect(await page.evaluate('window.__kubexaNoReload === true')).toBe(true);
    mkdirSync(join(SCREENSHOT, '..'), { recursive: true });
    await page.screenshot({ path: SCREENSHOT, fullPage: true });
  });
});
