// The Query view in headless Chromium, on the real path: a real test cluster (started here: the
// e2e project has none of its own), the collector's live query and capability catalog on its
// own identity, a real gateway stream into the demo gateway, and the page on the demo gateway's
// HTTP server. Screenshots are left in test-results/demo-ui/.
import { mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCapabilityCatalog } from '../../collector/catalog/capability-catalog.js';
import { createLiveQuery } from '../../collector/query/query-service.js';
import { ensureUiBuilt } from '../../demo-gateway/ui-build.js';
import { systemClock } from '../../shared/clock.js';
import { load } from '../../shared/config/load-for-test.js';
import { startCluster, stopCluster, type ClusterOptions } from '../cluster/cluster.js';
import { captureLogs, startHarness } from '../helpers/gateway-harness.js';
import { loadKubeConfig } from '../helpers/kube.js';
import { openDemoPage, requireChromium } from '../helpers/demo-page.js';
import { Registry } from 'prom-client';

const ARTIFACTS = join(import.meta.dirname, '..', '..', 'test-results', 'demo-ui');
const UI_WAIT_MS = 30_000;
const NAMESPACE = 'shop';

describe('the Query view in headless Chromium', () => {
  let page: Page;
  let url: string;
  const cleanups: (() => unknown)[] = [];

  const shot = async (name: string) => {
    mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: true });
  };

  beforeAll(async () => {
    requireChromium();
    await ensureUiBuilt();
    const options: ClusterOptions = {
      name: `kubexa-query-ui-${String(process.pid)}`,
      workdir: mkdtempSync(join(tmpdir(), 'kubexa-query-ui-')),
      env: process.env,
    };
    cleanups.push(() => stopCluster(options));
    const cluster = await startCluster(options);
    const kube = loadKubeConfig(cluster.kubeconfigPath);
    const core = kube.makeApiClient(CoreV1Api);
    await core.createNamespace({ body: { metadata: { name: NAMESPACE } } });
    for (const name of ['web', 'api', 'db']) {
      await core.createNamespacedConfigMap({
        namespace: NAMESPACE,
        body: { metadata: { name: `${name}-settings`, labels: { app: name } }, data: { a: '1' } },
      });
    }
    // Configmaps in shop may be read; secrets are refused by the policy although RBAC allows.
    const { config } = load(
      `query: {rules: [{namespace: ${NAMESPACE}, resources: [configmaps, pods]}]}`,
    );
    const logs = captureLogs();
    const live = createLiveQuery(config.query, {
      kube,
      logger: logs.logger,
      registry: new Registry(),
    });
    const harness = await startHarness({ deps: { queryHandler: live.handler } });
    cleanups.push(() => harness[Symbol.asyncDispose]());
    const catalog = createCapabilityCatalog(
      { clusterId: 'c', agentId: 'a' },
      {
        rest: live.rest,
        policy: live.policy,
        sink: harness.buffer,
        logger: logs.logger,
        clock: systemClock,
      },
    );
    await catalog.refresh(new AbortController().signal);
    cleanups.push(() => catalog.close());
    ({ url, page } = await openDemoPage(harness.gateway, cleanups));
  }, 240_000);

  afterAll(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
  });

  it('shows the catalog with RBAC and policy verdicts side by side, and the executor side', async () => {
    await page.goto(`${url}/#/query`);
    const configmaps = page.locator('tr.catalog-row[data-resource="v1/configmaps"]');
    await configmaps.waitFor({ timeout: UI_WAIT_MS });
    expect(await configmaps.locator('.rbac-verdict').textContent()).toBe('list ✓ watch ✓');
    expect(await configmaps.locator('.policy-verdict').textContent()).toBe('list ✓ get ✓');
    const secrets = page.locator('tr.catalog-row[data-resource="v1/secrets"]');
    // The admin identity may read secrets; the cluster owner's policy does not: the page says which.
    expect(await secrets.locator('.rbac-verdict').textContent()).toBe('list ✓ watch ✓');
    expect(await secrets.locator('.policy-verdict').textContent()).toBe('list ✗ get ✗');
    expect(await page.locator('.executor-state').textContent()).toBe('not deployed');
    expect(await page.locator('.capability-pod_exec .gate-off').count()).toBe(1);
    await shot('query-catalog');
  });

  it('lists as a table, pages on with the continue token, and gets one object as JSON', async () => {
    await page.locator('.catalog-filter').fill('configmaps');
    await page.locator('tr.catalog-row[data-resource="v1/configmaps"]').click();
    await page.locator('.q-namespace').fill(NAMESPACE);
    await page.locator('.q-limit').fill('2');
    await page.locator('.q-run').click();
    const rows = page.locator('.result-table tbody tr td:first-child');
    await rows.first().waitFor({ timeout: UI_WAIT_MS });
    const firstPage = await rows.allTextContents();
    expect(firstPage).toEqual(['api-settings', 'db-settings']);
    await shot('query-table');
    await page.locator('.q-next').click();
    await page.waitForFunction(
      `document.querySelector('.result-table tbody td')?.textContent === 'kube-root-ca.crt'`,
      undefined,
      { timeout: UI_WAIT_MS },
    );
    expect(await rows.allTextContents()).toEqual(['kube-root-ca.crt', 'web-settings']);
    // The last page: no continue token, no next button.
    expect(await page.locator('.q-next').count()).toBe(0);
    await page.locator('.q-name').fill('web-settings');
    await page.locator('.q-view').selectOption('full');
    await page.locator('.q-run').click();
    await page.locator('.result-json').waitFor({ timeout: UI_WAIT_MS });
    const json = await page.locator('.result-json').textContent();
    expect(json).toContain('"name": "web-settings"');
    expect(json).not.toContain('managedFields');
    await shot('query-json');
  });

  it('shows a refusal with its code and reason', async () => {
    await page.locator('.q-name').fill('');
    await page.locator('.q-namespace').fill('kube-system');
    await page.locator('.q-run').click();
    await page.locator('.refusal').waitFor({ timeout: UI_WAIT_MS });
    expect(await page.locator('.refusal-code').textContent()).toBe('POLICY_DENIED');
    expect(await page.locator('.refusal-reason').textContent()).toContain(
      'in namespace "kube-system"',
    );
    await shot('query-refusal');
  });
});
