// The State and Events views in headless Chromium, on the real path: a real test cluster
// (started here: the e2e project has none of its own), the collector as collector.ts wires it
// (state and events on, in this process), a real gateway stream into the demo gateway (which
// accepted lifecycle and Kubernetes events in its handshake), the page on its HTTP server.
// Screenshots are left in test-results/demo-ui/.
import { mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AppsV1Api, CoreV1Api, type V1PodStatus } from '@kubernetes/client-node';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureUiBuilt } from '../../demo-gateway/ui-build.js';
import { startCluster, stopCluster, type ClusterOptions } from '../cluster/cluster.js';
import { eventually, loadKubeConfig } from '../helpers/kube.js';
import { startStateCollector, type RunningStateCollector } from '../integration/state-collector.js';
import { openDemoPage, requireChromium } from '../helpers/demo-page.js';

const ARTIFACTS = join(import.meta.dirname, '..', '..', 'test-results', 'demo-ui');
const UI_WAIT_MS = 30_000;
const WAIT = { timeoutMs: 30_000, intervalMs: 200 };
const NAMESPACE = 'shop';
/** A node nobody manages: only this test writes the status of pods bound to it. */
const NO_NODE = 'no-such-node-kubexa';

describe('the State and Events views in headless Chromium', () => {
  let page: Page;
  let url: string;
  let core: CoreV1Api;
  let running: RunningStateCollector;
  const cleanups: (() => unknown)[] = [];

  const shot = async (name: string) => {
    mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: true });
  };
  const text = (selector: string) => page.locator(selector).first().textContent();

  beforeAll(async () => {
    requireChromium();
    await ensureUiBuilt();
    const options: ClusterOptions = {
      name: `kubexa-state-ui-${String(process.pid)}`,
      workdir: mkdtempSync(join(tmpdir(), 'kubexa-state-ui-')),
      env: process.env,
    };
    cleanups.push(() => stopCluster(options));
    const cluster = await startCluster(options);
    const kube = loadKubeConfig(cluster.kubeconfigPath);
    core = kube.makeApiClient(CoreV1Api);
    await core.createNamespace({ body: { metadata: { name: NAMESPACE } } });
    running = await startStateCollector(
      cluster.kubeconfigPath,
      [
        'collect:',
        '  logs: { enabled: false }',
        '  metrics: { enabled: false }',
        '  state:',
        '    enabled: true',
        '    redact_secrets: true',
        '    rules: [{resources: [pods, services, secrets, deployments, configmaps]}]',
        '  events: { enabled: true }',
      ],
      { acceptedPayloads: ['pod_lifecycle', 'kube_event'] },
    );
    cleanups.push(() => running.stop());
    await running.session();
    // Synced first: what pods show before the lifecycle watch's first list is a baseline.
    const healthPort = running.collector.health.ports().health;
    await eventually(
      'the state and events watches synced, the namespace ready for pods',
      async () => {
        const reply = await fetch(`http://127.0.0.1:${String(healthPort)}/readyz?verbose`);
        const body = (await reply.json()) as { components?: Record<string, { status: string }> };
        const synced = ['source:state', 'source:events'].every(
          (name) => body.components?.[name]?.status === 'ok',
        );
        if (!synced) return undefined;
        return core.readNamespacedServiceAccount({ name: 'default', namespace: NAMESPACE });
      },
      WAIT,
    );
    // The newcomer's cluster: a Deployment on the kwok nodes, a Service, a Secret, a ConfigMap.
    const apps = kube.makeApiClient(AppsV1Api);
    await apps.createNamespacedDeployment({
      namespace: NAMESPACE,
      body: {
        metadata: { name: 'web' },
        spec: {
          replicas: 2,
          selector: { matchLabels: { app: 'web' } },
          template: {
            metadata: { labels: { app: 'web' } },
            spec: { containers: [{ name: 'nginx', image: 'nginx:1.27' }] },
          },
        },
      },
    });
    await core.createNamespacedService({
      namespace: NAMESPACE,
      body: {
        metadata: { name: 'web' },
        spec: { ports: [{ port: 80 }], selector: { app: 'web' } },
      },
    });
    await core.createNamespacedSecret({
      namespace: NAMESPACE,
      body: { metadata: { name: 'db-password' }, stringData: { password: 'hunter2-canary' } },
    });
    await core.createNamespacedConfigMap({
      namespace: NAMESPACE,
      body: { metadata: { name: 'short-lived' }, data: { a: '1' } },
    });
    ({ url, page } = await openDemoPage(running.gateway, cleanups));
  }, 240_000);

  afterAll(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
  });

  it('shows resources by kind and namespace with live counts, a deletion, and sanitized JSON', async () => {
    await page.goto(`${url}/#/state`);
    const deployments = page.locator(
      `tr.state-ns-row[data-resource="deployments"][data-namespace="${NAMESPACE}"]`,
    );
    await deployments.waitFor({ timeout: UI_WAIT_MS });
    // Both pods of the Deployment, live, in the count beside pods/shop.
    await page.waitForFunction(
      `document.querySelector('tr.state-ns-row[data-resource="pods"][data-namespace="${NAMESPACE}"] .live-count')?.textContent === '2'`,
      undefined,
      { timeout: UI_WAIT_MS },
    );
    expect(await deployments.locator('.live-count').textContent()).toBe('1');

    // A deletion stays visible: counted as deleted, struck through, with its DELETED badge.
    await core.deleteNamespacedConfigMap({ name: 'short-lived', namespace: NAMESPACE });
    const configmaps = page.locator(
      `tr.state-ns-row[data-resource="configmaps"][data-namespace="${NAMESPACE}"]`,
    );
    await page.waitForFunction(
      `document.querySelector('tr.state-ns-row[data-resource="configmaps"][data-namespace="${NAMESPACE}"] .deleted-count')?.textContent === '1'`,
      undefined,
      { timeout: UI_WAIT_MS },
    );
    await configmaps.click();
    const gone = page.locator('tr.state-object[data-name="short-lived"]');
    await gone.waitFor({ timeout: UI_WAIT_MS });
    expect(await gone.getAttribute('class')).toContain('is-deleted');
    expect(await gone.locator('.change').textContent()).toBe('DELETED');
    expect(await page.locator('.state-change .change-deleted').count()).toBeGreaterThan(0);

    // A Secret's JSON on click: sanitized (no managedFields, values redacted).
    // Secrets never emit ADDED: the first event is the first change.
    await core.patchNamespacedSecret({
      name: 'db-password',
      namespace: NAMESPACE,
      body: [{ op: 'add', path: '/metadata/labels', value: { touched: 'yes' } }],
    });
    await page
      .locator(`tr.state-ns-row[data-resource="secrets"][data-namespace="${NAMESPACE}"]`)
      .click({ timeout: UI_WAIT_MS });
    await page.locator('tr.state-object[data-name="db-password"]').click({ timeout: UI_WAIT_MS });
    await page.locator('.state-json').waitFor({ timeout: UI_WAIT_MS });
    const secret = (await text('.state-json')) ?? '';
    expect(secret).toContain('"name": "db-password"');
    expect(secret).not.toContain('managedFields');
    expect(secret).not.toContain('hunter2');
    expect(secret).not.toContain(Buffer.from('hunter2-canary').toString('base64'));
    await page
      .locator(`tr.state-ns-row[data-resource="deployments"][data-namespace="${NAMESPACE}"]`)
      .click();
    await page.locator('tr.state-object[data-name="web"]').click({ timeout: UI_WAIT_MS });
    await page.waitForFunction(
      `document.querySelector('.state-json')?.textContent?.includes('"kind": "Deployment"')`,
      undefined,
      { timeout: UI_WAIT_MS },
    );
    expect(await text('.state-json')).not.toContain('managedFields');
    await shot('state-view');
  });

  it('shows events live with workload and count, lifecycle events by severity, and filters', async () => {
    // A pod of nobody's node whose status this test writes: a crash loop after an OOM kill.
    await core.createNamespacedPod({
      namespace: NAMESPACE,
      body: {
        metadata: { name: 'ledger' },
        spec: { nodeName: NO_NODE, containers: [{ name: 'app', image: 'registry.invalid/l:1' }] },
      },
    });
    await eventually(
      'ledger CREATED',
      () =>
        Promise.resolve(
          running.messages.some(
            (m) => m.payload?.$case === 'podLifecycle' && m.payload.value.pod === 'ledger',
          ) || undefined,
        ),
      WAIT,
    );
    const oom = { terminated: { reason: 'OOMKilled', exitCode: 137 } };
    const status = (state: object, restartCount: number, lastState: object): V1PodStatus => ({
      phase: 'Running',
      containerStatuses: [
        {
          name: 'app',
          image: 'registry.invalid/l:1',
          imageID: '',
          ready: false,
          restartCount,
          state,
          lastState,
        },
      ],
    });
    for (const next of [
      status({ running: { startedAt: new Date() } }, 0, {}),
      status(oom, 0, {}),
      status({ waiting: { reason: 'CrashLoopBackOff', message: 'back-off 10s' } }, 1, oom),
    ]) {
      const current = await core.readNamespacedPodStatus({ name: 'ledger', namespace: NAMESPACE });
      await core.replaceNamespacedPodStatus({
        name: 'ledger',
        namespace: NAMESPACE,
        body: Object.assign(current, { status: next }),
      });
    }
    const now = new Date();
    await core.createNamespacedEvent({
      namespace: NAMESPACE,
      body: {
        metadata: { name: 'ledger.backoff' },
        involvedObject: { kind: 'Pod', name: 'ledger', namespace: NAMESPACE, apiVersion: 'v1' },
        reason: 'BackOff',
        message: 'Back-off restarting failed container app',
        type: 'Warning',
        count: 4,
        firstTimestamp: now,
        lastTimestamp: now,
        source: { component: 'kubelet' },
      },
    });

    await page.goto(`${url}/#/events`);
    const crash = page.locator('tr.event-row[data-reason="CRASH_LOOP_BACK_OFF"]');
    await crash.waitFor({ timeout: UI_WAIT_MS });
    expect(await crash.getAttribute('class')).toContain('severity-error');
    expect(await crash.locator('.event-object').textContent()).toBe(`${NAMESPACE}/Pod/ledger`);
    expect(await crash.locator('.event-message').textContent()).toContain(
      'last exit 137 OOMKilled',
    );
    const oomRow = page.locator('tr.event-row[data-reason="OOM_KILLED"]');
    expect(await oomRow.getAttribute('class')).toContain('severity-error');
    const backoff = page.locator('tr.event-row[data-reason="BackOff"]');
    await backoff.waitFor({ timeout: UI_WAIT_MS });
    expect(await backoff.getAttribute('class')).toContain('severity-warning');
    expect(await backoff.locator('.event-count').textContent()).toBe('4');
    // The Deployment's pods: started by kwok, their workload resolved through the ReplicaSet.
    const started = page
      .locator('tr.event-row.from-lifecycle[data-reason="STARTED"][data-object^="Pod/web-"]')
      .first();
    await started.waitFor({ timeout: UI_WAIT_MS });
    expect(await started.locator('.event-workload').textContent()).toBe('Deployment/web');
    expect(await started.getAttribute('class')).toContain('severity-info');
    await shot('events-view');

    // The filter box: only what matches stays.
    await page.locator('.events-filter').fill('ledger');
    await page.waitForFunction(
      `[...document.querySelectorAll('tr.event-row')].every((r) => r.dataset.object === 'Pod/ledger')`,
      undefined,
      { timeout: UI_WAIT_MS },
    );
    const reasons = await page
      .locator('tr.event-row')
      .evaluateAll((rows) =>
        rows.map((r) => (r as unknown as { dataset: { reason: string } }).dataset.reason),
      );
    expect(reasons).toEqual(
      expect.arrayContaining([
        'BackOff',
        'CRASH_LOOP_BACK_OFF',
        'OOM_KILLED',
        'STARTED',
        'CREATED',
      ]),
    );
    // The web pods' rows are gone (they match neither the pod, nor the workload, nor a message).
    expect(await page.locator('tr.event-row[data-object^="Pod/web-"]').count()).toBe(0);
    await shot('events-filtered');
  });
});
