// The state source end to end: the real API server -> the collector (collector.ts wiring, in
// this process) -> the demo gateway. Create, update and delete of core, apps and CRD objects
// (the CRD installed after the collector started) arrive with the right types, kinds and
// sanitization; kubectl-applied Secrets keep or lose data by redact_secrets and always lose the
// last-applied annotation and managedFields; demand watchers reconcile; a rule naming a resource
// that does not exist is reported unavailable while the other watches run on.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import {
  ApiextensionsV1Api,
  AppsV1Api,
  CoreV1Api,
  CustomObjectsApi,
} from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { pino } from 'pino';
import { createStateSource } from '../../collector/sources/state/state-source.js';
import { KubeHttp } from '../../collector/watch/kube-http.js';
import { kubeListWatch, type KubeObject } from '../../collector/watch/kube-list-watch.js';
import { AgentMessage, ResourceKind } from '../../proto/index.js';
import { systemClock } from '../../shared/clock.js';
import { loadConfig } from '../../shared/config/load-config.js';
import {
  createTestNamespace,
  eventually,
  loadKubeConfig,
  type TestNamespace,
} from '../helpers/kube.js';
import {
  decodeState,
  startStateCollector,
  type RunningStateCollector,
  type SeenState,
} from './state-collector.js';

const execFileAsync = promisify(execFile);
const kubeconfigPath = inject('kubeconfigPath');
const binDir = inject('clusterBinDir');
const kc = loadKubeConfig(kubeconfigPath);
const core = kc.makeApiClient(CoreV1Api);
const apps = kc.makeApiClient(AppsV1Api);
const crds = kc.makeApiClient(ApiextensionsV1Api);
const custom = kc.makeApiClient(CustomObjectsApi);
const WAIT = { timeoutMs: 30_000, intervalMs: 100 };

let ns: TestNamespace;
let scratch: string;
beforeAll(async () => {
  ns = await createTestNamespace(kc, 'state');
  scratch = mkdtempSync(join(tmpdir(), 'kubexa-state-'));
});
afterAll(async () => {
  await ns.delete();
  rmSync(scratch, { recursive: true, force: true });
});

async function kubectlApply(manifest: object): Promise<void> {
  const path = join(scratch, `manifest-${String(Date.now())}.json`);
  writeFileSync(path, JSON.stringify(manifest));
  await execFileAsync(join(binDir, 'kubectl'), [
    '--kubeconfig',
    kubeconfigPath,
    'apply',
    '-f',
    path,
  ]);
}

const find = (states: readonly SeenState[], resource: string, name: string, type?: string) =>
  states.filter(
    (s) => s.resource === resource && s.name === name && (type === undefined || s.type === type),
  );

async function arrives(
  states: readonly SeenState[],
  resource: string,
  name: string,
  type: string,
): Promise<SeenState> {
  return eventually(
    `${type} ${resource}/${name} at the gateway`,
    () => Promise.resolve(find(states, resource, name, type).at(-1)),
    WAIT,
  );
}

function metadataOf(state: SeenState): Record<string, unknown> {
  return state.object['metadata'] as Record<string, unknown>;
}

/** /readyz?verbose's source:state component once it is ok. */
async function stateReadiness(
  running: RunningStateCollector,
): Promise<{ status: string; reason?: string }> {
  const port = running.collector.health.ports().health;
  return eventually(
    'state readiness',
    async () => {
      const reply = await fetch(`http://127.0.0.1:${String(port)}/readyz?verbose=true`);
      const body = (await reply.json()) as {
        components?: Record<string, { status: string; reason?: string }>;
      };
      const state = body.components?.['source:state'];
      return state?.status === 'ok' ? state : undefined;
    },
    WAIT,
  );
}

const GROUP = 'stable.example.com';
function widgetCrd(plural: string) {
  return {
    metadata: { name: `${plural}.${GROUP}` },
    spec: {
      group: GROUP,
      scope: 'Namespaced',
      names: {
        plural,
        singular: plural.slice(0, -1),
        kind: `${plural[0]?.toUpperCase() ?? ''}${plural.slice(1, -1)}`,
      },
      versions: [
        {
          name: 'v1',
          served: true,
          storage: true,
          schema: {
            openAPIV3Schema: {
              type: 'object',
              properties: { spec: { type: 'object', properties: { size: { type: 'integer' } } } },
            },
          },
        },
      ],
    },
  };
}

describe('state source against the real API server', () => {
  it('sends core, apps and CRD changes sanitized, picks up a CRD installed after start, and stops cleanly when it goes', async () => {
    const plural = `widgets${String(Date.now() % 100000)}`;
    await using running = await startStateCollector(kubeconfigPath, [
      'collect:',
      '  logs: { enabled: false }',
      '  events: { enabled: false }',
      '  state:',
      '    redact_secrets: false',
      '    rules:',
      `      - namespace: ${ns.name}`,
      `        resources: [configmaps, deployments, secrets, ${GROUP}/v1/${plural}]`,
    ]);
    const { states } = running;
    // Ready once the served resources synced; the CRD that does not exist yet is named.
    const readiness = await stateReadiness(running);
    expect(readiness.reason).toContain(`unavailable: ${GROUP}/v1/${plural}`);

    // Core: a ConfigMap applied with kubectl (the last-applied annotation) and its managedFields.
    await kubectlApply({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: {
        name: 'settings',
        namespace: ns.name,
        labels: { app: 'shop' },
        annotations: { keep: 'me' },
      },
      data: { mode: 'a' },
    });
    const added = await arrives(states, 'configmaps', 'settings', 'ADDED');
    expect(added.kind).toBe(ResourceKind.RESOURCE_KIND_CONFIGMAP);
    expect(added.apiVersion).toBe('v1');
    expect(added.namespace).toBe(ns.name);
    expect(added.labels).toEqual({ app: 'shop' });
    expect(added.object['data']).toEqual({ mode: 'a' });
    expect(metadataOf(added)['managedFields']).toBeUndefined();
    expect(metadataOf(added)['annotations']).toEqual({ keep: 'me' });
    await core.patchNamespacedConfigMap({
      name: 'settings',
      namespace: ns.name,
      body: [{ op: 'replace', path: '/data/mode', value: 'b' }],
    });
    const modified = await arrives(states, 'configmaps', 'settings', 'MODIFIED');
    expect(modified.object['data']).toEqual({ mode: 'b' });
    await core.deleteNamespacedConfigMap({ name: 'settings', namespace: ns.name });
    await arrives(states, 'configmaps', 'settings', 'DELETED');

    // Apps: a Deployment applied with kubectl, updated, deleted; sanitized each time.
    await kubectlApply({
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'web', namespace: ns.name, annotations: { team: 'shop' } },
      spec: {
        replicas: 0,
        selector: { matchLabels: { app: 'web' } },
        template: {
          metadata: { labels: { app: 'web' } },
          spec: { containers: [{ name: 'web', image: 'registry.invalid/web:1' }] },
        },
      },
    });
    const deployment = await arrives(states, 'deployments', 'web', 'ADDED');
    expect(deployment.kind).toBe(ResourceKind.RESOURCE_KIND_DEPLOYMENT);
    expect(deployment.apiVersion).toBe('apps/v1');
    expect(deployment.object['kind']).toBe('Deployment');
    expect(metadataOf(deployment)['annotations']).toMatchObject({ team: 'shop' });
    expect(
      (metadataOf(deployment)['annotations'] as Record<string, string>)[
        'kubectl.kubernetes.io/last-applied-configuration'
      ],
    ).toBeUndefined();
    expect(metadataOf(deployment)['managedFields']).toBeUndefined();
    await apps.patchNamespacedDeployment({
      name: 'web',
      namespace: ns.name,
      body: [
        {
          op: 'replace',
          path: '/spec/template/spec/containers/0/image',
          value: 'registry.invalid/web:2',
        },
      ],
    });
    const updated = await eventually(
      'the Deployment update at the gateway',
      () =>
        Promise.resolve(
          find(states, 'deployments', 'web', 'MODIFIED').find((s) =>
            JSON.stringify(s.object['spec']).includes('registry.invalid/web:2'),
          ),
        ),
      WAIT,
    );
    expect(updated.kind).toBe(ResourceKind.RESOURCE_KIND_DEPLOYMENT);
    expect(updated.apiVersion).toBe('apps/v1');
    expect(
      (metadataOf(updated)['annotations'] as Record<string, string>)[
        'kubectl.kubernetes.io/last-applied-configuration'
      ],
    ).toBeUndefined();
    expect(metadataOf(updated)['managedFields']).toBeUndefined();
    await apps.deleteNamespacedDeployment({ name: 'web', namespace: ns.name });
    const gone = await arrives(states, 'deployments', 'web', 'DELETED');
    expect(gone.kind).toBe(ResourceKind.RESOURCE_KIND_DEPLOYMENT);
    expect(metadataOf(gone)['managedFields']).toBeUndefined();
    expect(find(states, 'deployments', 'web', 'ADDED')).toHaveLength(1);
    expect(find(states, 'deployments', 'web', 'DELETED')).toHaveLength(1);

    // A CRD installed after start: picked up by discovery, its objects flow as UNSPECIFIED.
    await crds.createCustomResourceDefinition({ body: widgetCrd(plural) });
    await eventually(
      'the CRD established',
      async () => {
        const crd = await crds.readCustomResourceDefinition({ name: `${plural}.${GROUP}` });
        const established = crd.status?.conditions?.some(
          (c) => c.type === 'Established' && c.status === 'True',
        );
        return established === true ? true : undefined;
      },
      WAIT,
    );
    const widget = {
      apiVersion: `${GROUP}/v1`,
      kind: `${plural[0]?.toUpperCase() ?? ''}${plural.slice(1, -1)}`,
      metadata: { name: 'w1' },
      spec: { size: 3 },
    };
    // The watch starts at the next discovery round; an object created before is in its list.
    await custom.createNamespacedCustomObject({
      group: GROUP,
      version: 'v1',
      namespace: ns.name,
      plural,
      body: widget,
    });
    const crdAdded = await arrives(states, plural, 'w1', 'ADDED');
    expect(crdAdded.kind).toBe(ResourceKind.RESOURCE_KIND_UNSPECIFIED);
    expect(crdAdded.apiVersion).toBe(`${GROUP}/v1`);
    expect(crdAdded.object['spec'], JSON.stringify(crdAdded.object)).toEqual({ size: 3 });
    const current = (await custom.getNamespacedCustomObject({
      group: GROUP,
      version: 'v1',
      namespace: ns.name,
      plural,
      name: 'w1',
    })) as { spec: { size: number } };
    await custom.replaceNamespacedCustomObject({
      group: GROUP,
      version: 'v1',
      namespace: ns.name,
      plural,
      name: 'w1',
      body: { ...current, spec: { size: 4 } },
    });
    const crdModified = await arrives(states, plural, 'w1', 'MODIFIED');
    expect(crdModified.kind).toBe(ResourceKind.RESOURCE_KIND_UNSPECIFIED);
    expect(crdModified.apiVersion).toBe(`${GROUP}/v1`);
    expect(crdModified.resource).toBe(plural);
    expect(crdModified.object['spec']).toEqual({ size: 4 });
    expect(metadataOf(crdModified)['managedFields']).toBeUndefined();
    // Removing the CRD deletes its objects (DELETED sent), then the watch stops: no errors.
    await crds.deleteCustomResourceDefinition({ name: `${plural}.${GROUP}` });
    await arrives(states, plural, 'w1', 'DELETED');
    await eventually(
      'the CRD watch reported unavailable again',
      () =>
        Promise.resolve(
          running.logs.raw.some(
            (l) => l.includes('"why":"resource removed"') && l.includes(plural),
          ) || undefined,
        ),
      WAIT,
    );
    expect(find(states, plural, 'w1').map((e) => e.type)).toEqual(['ADDED', 'MODIFIED', 'DELETED']);
    const warnings = running.logs.raw.filter((l) => l.includes('"msg":"watch failed"'));
    expect(warnings).toEqual([]);

    // Secrets: redaction off keeps data; kubectl's annotation and managedFields always go.
    // No ADDED ever: the first event of a new Secret is its first change (the Go agent's rule).
    const secret = (value: string) => ({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'db', namespace: ns.name },
      data: { password: Buffer.from(value).toString('base64') },
    });
    await kubectlApply(secret('canary-one-4711'));
    await kubectlApply(secret('canary-two-4712'));
    const changed = await arrives(states, 'secrets', 'db', 'MODIFIED');
    expect(changed.kind).toBe(ResourceKind.RESOURCE_KIND_SECRET);
    expect(changed.object['data']).toEqual({
      password: Buffer.from('canary-two-4712').toString('base64'),
    });
    expect(metadataOf(changed)['annotations']).toBeUndefined();
    expect(metadataOf(changed)['managedFields']).toBeUndefined();
    expect(find(states, 'secrets', 'db', 'ADDED')).toEqual([]);
    // Never in the collector's own logs, at any level.
    const logged = running.logs.raw.join('\n');
    for (const needle of [
      'canary-one-4711',
      'canary-two-4712',
      Buffer.from('canary-two-4712').toString('base64'),
    ]) {
      expect(logged).not.toContain(needle);
    }
  }, 180_000);

  it('with redact_secrets on: a kubectl-applied Secret loses its data, its annotation and managedFields', async () => {
    await using running = await startStateCollector(kubeconfigPath, [
      'collect:',
      '  logs: { enabled: false }',
      '  events: { enabled: false }',
      '  state:',
      '    redact_secrets: true',
      '    rules:',
      `      - namespace: ${ns.name}`,
      '        resources: [secrets]',
      `        field_selector: metadata.name=redacted`,
    ]);
    await stateReadiness(running);
    const secret = (value: string) => ({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'redacted', namespace: ns.name },
      stringData: { token: value },
    });
    await kubectlApply(secret('canary-three-4713'));
    await kubectlApply(secret('canary-four-4714'));
    const changed = await arrives(running.states, 'secrets', 'redacted', 'MODIFIED');
    expect(changed.object['data']).toBeUndefined();
    expect(changed.object['stringData']).toBeUndefined();
    expect(metadataOf(changed)['annotations']).toBeUndefined();
    expect(metadataOf(changed)['managedFields']).toBeUndefined();
    expect(JSON.stringify(running.states)).not.toContain(
      Buffer.from('canary-four-4714').toString('base64'),
    );
    // The field selector kept the other Secret out.
    expect(running.states.every((s) => s.name === 'redacted')).toBe(true);
  }, 120_000);

  it('demand watchers: starts the missing, leaves them on an ingest-only update, stops the unwanted without DELETED', async () => {
    await using running = await startStateCollector(kubeconfigPath, [
      'collect:',
      '  logs: { enabled: false }',
      '  events: { enabled: false }',
      '  state:',
      '    rules:',
      `      - namespace: ${ns.name}`,
      '        resources: [configmaps]',
    ]);
    const session = await running.session();
    const sa = (name: string) =>
      core.createNamespacedServiceAccount({ namespace: ns.name, body: { metadata: { name } } });
    const watchers = (resources: { group: string; version: string; resource: string }[]) => ({
      configVersion: 'v1',
      config: {
        logCollectors: [],
        watchers: [{ id: 'w', namespace: '', kinds: [], resyncSec: 0, resources }],
        metricScrapers: [],
        heartbeatIntervalSec: 0,
        batchSize: 0,
        flushIntervalMs: 0,
      },
    });
    expect(
      running.gateway.sendConfigUpdate(
        session,
        watchers([{ group: '', version: 'v1', resource: 'serviceaccounts' }]),
      ),
    ).toBe(true);
    await sa('demand-one');
    await arrives(running.states, 'serviceaccounts', 'demand-one', 'ADDED');
    // Ingest rules only: the demand watch stays.
    running.gateway.sendConfigUpdate(session, {
      configVersion: 'v2',
      config: {
        logCollectors: [],
        watchers: [],
        metricScrapers: [],
        heartbeatIntervalSec: 0,
        batchSize: 0,
        flushIntervalMs: 0,
        ingestRules: {
          maxLineBytes: '0',
          maxSampleAgeMs: '0',
          maxFutureSkewMs: '0',
          perStreamRateBytes: '0',
          perStreamBurstBytes: '0',
        },
      },
    });
    await sa('demand-two');
    await arrives(running.states, 'serviceaccounts', 'demand-two', 'ADDED');
    // One watcher with no resources: stop, and say nothing about the cached objects.
    const before = running.states.length;
    running.gateway.sendConfigUpdate(session, watchers([]));
    await eventually(
      'the demand watch stopped',
      () =>
        Promise.resolve(
          running.logs.raw.some(
            (l) => l.includes('"why":"no longer wanted"') && l.includes('serviceaccounts'),
          ) || undefined,
        ),
      WAIT,
    );
    await sa('demand-three');
    await core.createNamespacedConfigMap({
      namespace: ns.name,
      body: { metadata: { name: 'marker' } },
    });
    // The static rule still runs: the marker arrives, and nothing about serviceaccounts did.
    await arrives(running.states, 'configmaps', 'marker', 'ADDED');
    // In this test's namespace: the cluster-wide watch also saw other tests' namespaces being
    // finalized (their ServiceAccounts DELETED for real) until it stopped.
    const after = running.states.slice(before);
    expect(
      after.filter((s) => s.resource === 'serviceaccounts' && s.namespace === ns.name),
    ).toEqual([]);
  }, 120_000);
});

describe('state source: bad input and security.profile strict', () => {
  it('a malformed selector and an unknown resource are reported unavailable; the other watches run on', async () => {
    await using running = await startStateCollector(kubeconfigPath, [
      'collect:',
      '  logs: { enabled: false }',
      '  events: { enabled: false }',
      '  state:',
      '    rules:',
      `      - id: broken-selector`,
      `        namespace: ${ns.name}`,
      '        resources: [services]',
      '        label_selector: "app in (a"',
      `      - id: no-such-crd`,
      `        namespace: ${ns.name}`,
      '        resources: [example.com/v1/widgets]',
      `      - id: fine`,
      `        namespace: ${ns.name}`,
      '        resources: [configmaps]',
    ]);
    const readiness = await eventually(
      'both bad watches reported',
      async () => {
        const health = await stateReadiness(running);
        return health.reason?.includes('v1/services') === true &&
          health.reason.includes('example.com/v1/widgets')
          ? health
          : undefined;
      },
      WAIT,
    );
    expect(readiness.reason).toMatch(
      /unavailable: v1\/services \(namespace [^)]+\): the API server refused the list/,
    );
    expect(readiness.reason).toContain('unavailable: example.com/v1/widgets');
    await core.createNamespacedConfigMap({
      namespace: ns.name,
      body: { metadata: { name: 'still-flowing' } },
    });
    await arrives(running.states, 'configmaps', 'still-flowing', 'ADDED');
  }, 120_000);

  it('discovery sleeps while every watch runs, and asks again every interval while one waits for its resource', async () => {
    /** The source's discovery requests (the roots, or a group version's list), not its lists. */
    const asked: string[] = [];
    const isDiscovery = (path: string) => /^\/apis?(\/[^/]+){0,2}$/.test(path);
    const real = new KubeHttp(kc);
    const http = Object.assign(Object.create(real) as KubeHttp, {
      getJsonIfChanged: (...args: Parameters<KubeHttp['getJsonIfChanged']>) => {
        asked.push(args[0].path);
        return real.getJsonIfChanged(...args);
      },
      getJson: (...args: Parameters<KubeHttp['getJson']>) => {
        if (isDiscovery(args[0].path)) asked.push(args[0].path);
        return real.getJson(...args);
      },
      stream: (...args: Parameters<KubeHttp['stream']>) => real.stream(...args),
    });
    const INTERVAL_MS = 200;
    const rule = (id: string, resources: string[]) => ({
      id,
      namespace: ns.name,
      resources,
      label_selector: '',
      field_selector: '',
    });
    const sourceWith = (rules: ReturnType<typeof rule>[]) =>
      createStateSource(
        {
          state: { enabled: true, resync_period: 0, redact_secrets: true, rules },
          identity: { clusterId: 'c', agentId: 'a' },
          secretsMetadataOnly: false,
          discoveryIntervalMs: INTERVAL_MS,
        },
        {
          logger: pino({ level: 'silent' }),
          clock: systemClock,
          sink: { enqueue: () => undefined },
          http,
        },
      );
    const settle = () => new Promise((resolve) => setTimeout(resolve, 15 * INTERVAL_MS));
    try {
      // Every resource served: one round at start (the two roots), then nothing for 15 intervals.
      const served = sourceWith([rule('served', ['configmaps', 'deployments'])]);
      await served.start(new AbortController().signal);
      await eventually(
        'both watches synced',
        () => Promise.resolve(served.watches().every((w) => w.state === 'synced') || undefined),
        WAIT,
      );
      await settle();
      await served.close();
      expect(asked).toEqual(['/api', '/apis']);

      // One resource not served: asked again every interval while it waits.
      asked.length = 0;
      const waiting = sourceWith([
        rule('served', ['configmaps']),
        rule('waiting', ['nothing.kubexa.test/v1/gadgets']),
      ]);
      await waiting.start(new AbortController().signal);
      try {
        await eventually(
          'three more rounds while the resource is not served',
          () => Promise.resolve(asked.filter((path) => path === '/apis').length >= 4 || undefined),
          WAIT,
        );
      } finally {
        await waiting.close();
      }
    } finally {
      real.close();
    }
  });

  it('config check names the key of a bare unknown resource in a state rule', () => {
    expect(() =>
      loadConfig({
        fileText: [
          'gateway: { address: "gw:443" }',
          'collect:',
          '  state:',
          '    rules:',
          '      - resources: [configmaps, widgets]',
          '',
        ].join('\n'),
        env: { KUBEXA_TENANT_TOKEN: 'token-for-test' },
      }),
    ).toThrow(/collect\.state\.rules\[0\]\.resources\[1\]: "widgets" is not a resource/);
  });

  it('config check names the key of a partial wildcard in a state rule', () => {
    expect(() =>
      loadConfig({
        fileText: [
          'gateway: { address: "gw:443" }',
          'collect:',
          '  state:',
          '    rules:',
          '      - resources: ["deploy*"]',
          '',
        ].join('\n'),
        env: { KUBEXA_TENANT_TOKEN: 'token-for-test' },
      }),
    ).toThrow(/collect\.state\.rules\.0\.resources\.0|collect\.state\.rules\[0\]\.resources\[0\]/);
  });

  it('under strict, Secrets are read as metadata only: no value reaches the process, and the event is a bodiless Secret', async () => {
    const value = 'canary-strict-4715';
    await core.createNamespacedSecret({
      namespace: ns.name,
      body: {
        metadata: { name: 'strict-one', labels: { strict: 'yes' } },
        stringData: { token: value },
      },
    });
    const encoded = Buffer.from(value).toString('base64');
    // The watch layer: everything parsed off the wire, list and watch, as the transform sees it.
    const http = new KubeHttp(kc);
    const seenRaw: string[] = [];
    const listWatch = kubeListWatch(
      http,
      {
        group: '',
        version: 'v1',
        resource: 'secrets',
        namespaced: true,
        namespace: ns.name,
        labelSelector: 'strict=yes',
        metadataOnly: true,
      },
      (object: KubeObject) => {
        seenRaw.push(JSON.stringify(object));
        return object;
      },
    );
    const stop = new AbortController();
    try {
      const page = await listWatch.list(stop.signal);
      expect(page.items.map((o) => o.metadata?.name)).toEqual(['strict-one']);
      const watching = listWatch.watch(page.resourceVersion, () => undefined, stop.signal);
      await core.patchNamespacedSecret({
        name: 'strict-one',
        namespace: ns.name,
        body: [{ op: 'add', path: '/stringData', value: { token: `${value}-2` } }],
      });
      await eventually(
        'the watch event',
        () => Promise.resolve(seenRaw.length >= 2 || undefined),
        WAIT,
      );
      stop.abort();
      await watching;
    } finally {
      stop.abort();
      http.close();
    }
    expect(seenRaw.every((raw) => raw.includes('"kind":"PartialObjectMetadata'))).toBe(true);
    for (const raw of seenRaw) {
      expect(raw).not.toContain(encoded);
      expect(raw).not.toContain(Buffer.from(`${value}-2`).toString('base64'));
      expect(raw).not.toContain('"data"');
    }

    // The state source with the strict profile's setting: the StateEvent names a Secret, bodiless.
    const sunk: AgentMessage[] = [];
    const sourceHttp = new KubeHttp(kc);
    const source = createStateSource(
      {
        state: {
          enabled: true,
          resync_period: 0,
          redact_secrets: true,
          rules: [
            {
              id: 's',
              namespace: ns.name,
              resources: ['secrets'],
              label_selector: 'strict=yes',
              field_selector: '',
            },
          ],
        },
        identity: { clusterId: 'c', agentId: 'a' },
        secretsMetadataOnly: true,
      },
      {
        logger: pino({ level: 'silent' }),
        clock: systemClock,
        sink: { enqueue: (item) => sunk.push(AgentMessage.decode(item.payload)) },
        http: sourceHttp,
      },
    );
    await source.start(new AbortController().signal);
    try {
      await eventually('synced', () => Promise.resolve(source.up() || undefined), WAIT);
      await core.patchNamespacedSecret({
        name: 'strict-one',
        namespace: ns.name,
        body: [{ op: 'add', path: '/metadata/labels/touched', value: 'yes' }],
      });
      const event = await eventually(
        'the Secret change',
        () => Promise.resolve(sunk.map(decodeState).find((s) => s?.name === 'strict-one')),
        WAIT,
      );
      expect(event.type).toBe('MODIFIED');
      expect(event.object['kind']).toBe('Secret');
      expect(event.object['apiVersion']).toBe('v1');
      expect(event.object['data']).toBeUndefined();
      expect(event.labels).toMatchObject({ touched: 'yes' });
    } finally {
      await source.close();
      sourceHttp.close();
    }
  }, 120_000);
});
