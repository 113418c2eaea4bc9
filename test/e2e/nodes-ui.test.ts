// The Nodes view in headless Chromium, on the real path: a real test cluster (started here: the
// e2e project has none of its own), the collector's live query reading nodes and pods, a real
// gateway stream into the demo gateway, the node job router and a real executor on a real Unix
// socket, and the page on the demo gateway's HTTP server. The page cordons a kwok node (checked
// in the API server), runs a dry-run drain with its per-pod progress, and shows a refusal with
// its code and reason. Screenshots are left in test-results/demo-ui/.
import { mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AppsV1Api, CoreV1Api } from '@kubernetes/client-node';
import type { Page } from 'playwright-core';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createNodeJobRouter,
  type NodeJobRouter,
} from '../../collector/executor-client/node-job-router.js';
import { createLiveQuery } from '../../collector/query/query-service.js';
import { ensureUiBuilt } from '../../demo-gateway/ui-build.js';
import { load } from '../../shared/config/load-for-test.js';
import { startCluster, stopCluster, type ClusterOptions } from '../cluster/cluster.js';
import { captureLogs, startHarness } from '../helpers/gateway-harness.js';
import { eventually, loadKubeConfig } from '../helpers/kube.js';
import { startTestExecutor } from '../helpers/node-job-executor.js';
import { openDemoPage, requireChromium } from '../helpers/demo-page.js';

const ARTIFACTS = join(import.meta.dirname, '..', '..', 'test-results', 'demo-ui');
const UI_WAIT_MS = 30_000;
const NAMESPACE = 'shop';

describe('the Nodes view in headless Chromium', () => {
  let page: Page;
  let url: string;
  let core: CoreV1Api;
  let router: NodeJobRouter | undefined;
  const cleanups: (() => unknown)[] = [];

  const shot = async (name: string) => {
    mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: true });
  };
  const row = (node: string) => page.locator(`tr.node-row[data-node="${node}"]`);

  beforeAll(async () => {
    requireChromium();
    await ensureUiBuilt();
    const clusterOptions = (): ClusterOptions => ({
      name: `kubexa-nodes-ui-${String(process.pid)}`,
      workdir: mkdtempSync(join(tmpdir(), 'kubexa-nodes-ui-')),
      env: process.env,
    });
    let options = clusterOptions();
    cleanups.push(() => stopCluster(options));
    // One retry, as the integration setup does: a start can time out on a loaded machine
    // (startCluster stops what it started before it throws).
    const cluster = await startCluster(options).catch(() => {
      options = clusterOptions();
      return startCluster(options);
    });
    const kube = loadKubeConfig(cluster.kubeconfigPath);
    core = kube.makeApiClient(CoreV1Api);
    await core.createNamespace({ body: { metadata: { name: NAMESPACE } } });
    // Two pods of a Deployment on kwok-node-1: what the drain dry run shows step by step.
    await kube.makeApiClient(AppsV1Api).createNamespacedDeployment({
      namespace: NAMESPACE,
      body: {
        metadata: { name: 'web' },
        spec: {
          replicas: 2,
          selector: { matchLabels: { app: 'web' } },
          template: {
            metadata: { labels: { app: 'web' } },
            spec: {
              nodeSelector: { 'kubernetes.io/hostname': 'kwok-node-1' },
              containers: [{ name: 'app', image: 'registry.invalid/web:1' }],
            },
          },
        },
      },
    });
    await eventually(
      'two running pods on kwok-node-1',
      async () => {
        const pods = await core.listNamespacedPod({ namespace: NAMESPACE });
        return pods.items.filter((p) => p.status?.phase === 'Running').length === 2
          ? true
          : undefined;
      },
      { timeoutMs: 90_000, intervalMs: 500 },
    );

    const { config } = load('query: {rules: [{resources: [nodes, pods]}]}');
    const live = createLiveQuery(config.query, {
      kube,
      logger: captureLogs().logger,
      registry: new Registry(),
    });
    cleanups.push(() => live.service.close());
    const harness = await startHarness({
      stream: {
        identity: {
          tenantToken: 'tenant-secret-0123456789',
          agentVersion: '0.1.0-test',
          clusterId: '6f1c2a4e-0000-4000-8000-000000000001',
          agentId: 'agent-under-test',
          // Node consoles advertised so the page offers them (none is opened here: the real
          // node's tests open them).
          capabilities: {
            logs: false,
            state: false,
            metrics: false,
            query: true,
            nodeJobs: true,
            nodeConsoles: true,
          },
        },
      },
      deps: {
        queryHandler: live.handler,
        nodeJobHandler: (request, answer) => {
          router?.handle(request, answer);
        },
      },
    });
    cleanups.push(() => harness[Symbol.asyncDispose]());
    // The executor trusts the demo gateway's key, as the demo's does; uncordon is not allowed,
    // so the page has a refusal to show.
    const executor = await startTestExecutor({
      kc: kube,
      configYaml: `
mutate:
  node:
    enabled: true
    nodes: ["kwok-node-*"]
    verbs: [cordon, drain]
    max_timeout_sec: 120
`,
      trustKey: harness.gateway.commandSigner,
    });
    cleanups.push(() => executor.close());
    router = createNodeJobRouter({
      socketPath: executor.socketPath,
      logger: pino({ level: 'silent' }),
      enqueue: (item) => {
        harness.buffer.enqueue(item);
      },
    });
    const routing = router;
    cleanups.push(() => routing.service.close());
    ({ url, page } = await openDemoPage(harness.gateway, cleanups));
  }, 400_000);

  afterAll(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
  });

  it('lists the nodes with their conditions, cordon state and pods', async () => {
    await page.goto(`${url}/#/nodes`);
    await row('kwok-node-1').waitFor({ timeout: UI_WAIT_MS });
    expect(await page.locator('tr.node-row').count()).toBe(3);
    expect(await row('kwok-node-1').locator('.node-ready').textContent()).toBe('Ready');
    expect(await row('kwok-node-1').locator('.node-cordon').textContent()).toBe('schedulable');
    expect(await row('kwok-node-1').locator('.node-pods summary').textContent()).toBe('2 pods');
    expect(await row('kwok-node-1').locator('.node-conditions').textContent()).toContain(
      'Ready=True',
    );
  });

  it('cordons a kwok node from the page: the API server says it is unschedulable', async () => {
    await row('kwok-node-0').locator('.node-cordon-btn').click();
    await page
      .locator('.node-job .job-outcome')
      .filter({ hasText: 'succeeded' })
      .waitFor({ timeout: UI_WAIT_MS });
    expect((await core.readNode({ name: 'kwok-node-0' })).spec?.unschedulable).toBe(true);
    // The page reads it back through the agent.
    await row('kwok-node-0').locator('.node-cordon.cordoned').waitFor({ timeout: UI_WAIT_MS });
    await page.locator('.node-audit').first().waitFor({ timeout: UI_WAIT_MS });
    await shot('nodes-cordon');
  });

  it('runs a drain dry run with per-pod progress, changing nothing', async () => {
    await row('kwok-node-1').locator('.node-drain-btn').click();
    const form = page.locator('.drain-form[data-node="kwok-node-1"]');
    await form.waitFor({ timeout: UI_WAIT_MS });
    expect(await form.locator('.drain-dry-run').isChecked()).toBe(true);
    await form.locator('.drain-timeout').fill('60');
    await form.locator('.drain-run').click();
    // The panel switches to the new job; its result ends it.
    await page
      .locator('.node-job')
      .filter({ hasText: 'drain kwok-node-1' })
      .locator('.job-outcome')
      .filter({ hasText: 'succeeded' })
      .waitFor({ timeout: UI_WAIT_MS });
    const heading = await page.locator('.node-job h3').textContent();
    expect(heading).toContain('drain kwok-node-1 (dry run)');
    // Each of the two pods has its own steps, as the executor streamed them.
    const stepRows = page.locator('.job-pod');
    const steps: string[] = [];
    for (let n = 0; n < (await stepRows.count()); n++) {
      const step = stepRows.nth(n);
      const pod = (await step.getAttribute('data-pod')) ?? '';
      steps.push(`${pod} ${(await step.locator('.job-pod-phase').textContent()) ?? ''}`);
    }
    const pods = new Set(steps.map((s) => s.split(' ')[0]));
    expect(pods.size).toBe(2);
    expect(steps.filter((s) => s.endsWith(' evicted'))).toHaveLength(2);
    expect(await page.locator('.job-result').textContent()).toContain('2 evicted');
    await shot('nodes-drain-dry-run');
    // A dry run: the node is not cordoned and both pods are still there.
    expect((await core.readNode({ name: 'kwok-node-1' })).spec?.unschedulable).not.toBe(true);
    const pods1 = await core.listNamespacedPod({ namespace: NAMESPACE });
    expect(pods1.items.filter((p) => p.metadata?.deletionTimestamp === undefined)).toHaveLength(2);
  });

  it('shows a refusal with its code and reason', async () => {
    await row('kwok-node-0').locator('.node-uncordon-btn').click();
    const refusal = page.locator('.node-job .job-refusal');
    await refusal.waitFor({ timeout: UI_WAIT_MS });
    expect(await refusal.locator('.refusal-code').textContent()).toBe('POLICY_DENIED');
    expect(await refusal.textContent()).toContain('mutate.node.verbs does not allow uncordon');
    await shot('nodes-refusal');
    expect((await core.readNode({ name: 'kwok-node-0' })).spec?.unschedulable).toBe(true);
  });

  it('links each node to its console in the Consoles view when an agent offers node consoles', async () => {
    await page.goto(`${url}/#/nodes`);
    const link = row('kwok-node-2').locator('.node-console-link');
    await link.waitFor({ timeout: UI_WAIT_MS });
    await link.click();
    await page.waitForURL(/#\/consoles\?node=kwok-node-2$/, { timeout: UI_WAIT_MS });
    const input = page.locator('.node-console-name');
    await input.waitFor({ timeout: UI_WAIT_MS });
    expect(await input.inputValue()).toBe('kwok-node-2');
    expect(await page.locator('.node-console-open').isEnabled()).toBe(true);
    await shot('nodes-console-link');
  });
});
