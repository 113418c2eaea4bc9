// One Chromium page on the demo gateway's web UI, for the end-to-end tests of its views: a new,
// empty browser profile per run, headless, UTC, and everything closed by the caller's cleanups.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import type { DemoGateway } from '../../demo-gateway/demo-gateway.js';
import { createWebUi } from '../../demo-gateway/web-ui.js';

/** Debian's Chromium unless KUBEXA_CHROMIUM names another build. */
export const CHROMIUM = process.env['KUBEXA_CHROMIUM'] ?? '/usr/bin/chromium';

/** Fails at once, naming the fix, when no Chromium is installed (never a silent skip). */
export function requireChromium(): void {
  if (!existsSync(CHROMIUM)) throw new Error(`no Chromium at ${CHROMIUM}: set KUBEXA_CHROMIUM`);
}

export interface DemoPage {
  /** The web UI's base URL, e.g. http://127.0.0.1:41234. */
  readonly url: string;
  readonly page: Page;
  readonly context: BrowserContext;
  /** Stops the web UI's server (idempotent): the page then finds the gateway unreachable. */
  readonly stopUi: () => Promise<void>;
}

/**
 * Serves `gateway`'s web UI on a free loopback port and opens it in headless Chromium. Each
 * resource it opens is pushed onto `cleanups` (run them in reverse order).
 */
export async function openDemoPage(
  gateway: DemoGateway,
  cleanups: (() => unknown)[],
  options: {
    readonly viewport?: { readonly width: number; readonly height: number };
    /** Where downloads land; set to accept downloads. */
    readonly downloadsPath?: string;
  } = {},
): Promise<DemoPage> {
  const ui = createWebUi(gateway);
  let uiClosed: Promise<void> | undefined;
  const stopUi = (): Promise<void> => (uiClosed ??= ui.close());
  cleanups.push(stopUi);
  const url = await ui.listen({ host: '127.0.0.1', port: 0 });
  const profile = mkdtempSync(join(tmpdir(), 'kubexa-chromium-'));
  cleanups.push(() => {
    rmSync(profile, { recursive: true, force: true });
  });
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run'],
    viewport: options.viewport ?? { width: 1500, height: 1000 },
    timezoneId: 'UTC',
    ...(options.downloadsPath === undefined
      ? {}
      : { acceptDownloads: true, downloadsPath: options.downloadsPath }),
  });
  cleanups.push(() => context.close());
  const page = context.pages()[0] ?? (await context.newPage());
  return { url, page, context, stopUi };
}
