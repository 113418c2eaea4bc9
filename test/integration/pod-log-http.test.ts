// The pod log reader (node:https straight to pods/log) against the real API server and kwok:
// the body arrives whole and in order, refusals carry their HTTP status and the API server's
// message, and an abort ends a followed stream quietly.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { PodLogHttp, PodLogRequestError } from '../../collector/sources/pod-logs/pod-log-http.js';
import {
  createTestNamespace,
  criLine,
  eventually,
  loadKubeConfig,
  serveLogsFromFile,
  waitForRunningPods,
  type TestNamespace,
} from '../helpers/kube.js';

const kc = loadKubeConfig(inject('kubeconfigPath'));
const LINES = 2000;

let ns: TestNamespace;
let scratch: string;

beforeAll(async () => {
  ns = await createTestNamespace(kc, 'podloghttp');
  scratch = await mkdtemp(join(tmpdir(), 'kubexa-podloghttp-'));
  const logsFile = join(scratch, 'app.log');
  const start = Date.now() - 60_000;
  await writeFile(
    logsFile,
    Array.from({ length: LINES }, (_, i) => criLine(new Date(start + i), `line-${String(i)}`)).join(
      '',
    ),
  );
  await serveLogsFromFile(kc, { namespace: ns.name, logsFile });
  await kc.makeApiClient(CoreV1Api).createNamespacedPod({
    namespace: ns.name,
    body: {
      metadata: { name: 'app-1' },
      spec: {
        containers: [{ name: 'app', image: 'registry.invalid/app:1' }],
        tolerations: [{ key: 'kwok.x-k8s.io/node', operator: 'Exists', effect: 'NoSchedule' }],
      },
    },
  });
  await waitForRunningPods(kc, ns.name, 1);
});

afterAll(async () => {
  await ns.delete();
  await rm(scratch, { recursive: true, force: true });
});

const request = (extra: { follow?: boolean; pod?: string; tailLines?: number } = {}) => ({
  namespace: ns.name,
  pod: extra.pod ?? 'app-1',
  container: 'app',
  follow: extra.follow ?? false,
  ...(extra.tailLines === undefined ? {} : { tailLines: extra.tailLines }),
});

describe('PodLogHttp', () => {
  it('hands over the whole body, in order, with the runtime timestamps', async () => {
    const reader = new PodLogHttp(kc);
    // kwok may need a moment before it serves a new pod's log.
    const text = await eventually(
      'the log of app-1',
      async () => {
        const chunks: Buffer[] = [];
        await reader.read(request(), new AbortController().signal, (chunk) => {
          // The chunk is ours only during the call: keep a copy.
          chunks.push(Buffer.from(chunk));
        });
        const body = Buffer.concat(chunks).toString('utf8');
        return body === '' ? undefined : body;
      },
      { timeoutMs: 30_000, intervalMs: 300 },
    );
    const lines = text.trimEnd().split('\n');
    expect(lines).toHaveLength(LINES);
    expect(lines.map((l) => l.slice(l.indexOf(' ') + 1))).toEqual(
      Array.from({ length: LINES }, (_, i) => `line-${String(i)}`),
    );
    expect(lines[0]).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z line-0$/);
    // A second read on the same reader (its kept-alive agent) honours tailLines.
    const tail: Buffer[] = [];
    await reader.read(request({ tailLines: 3 }), new AbortController().signal, (chunk) =>
      tail.push(Buffer.from(chunk)),
    );
    expect(
      Buffer.concat(tail)
        .toString('utf8')
        .trimEnd()
        .split('\n')
        .map((l) => l.slice(l.indexOf(' ') + 1)),
    ).toEqual([
      `line-${String(LINES - 3)}`,
      `line-${String(LINES - 2)}`,
      `line-${String(LINES - 1)}`,
    ]);
    // tailLines 0 is "nothing before now", as kubectl --tail=0: not the whole history.
    let tailZeroBytes = 0;
    await reader.read(request({ tailLines: 0 }), new AbortController().signal, (chunk) => {
      tailZeroBytes += chunk.length;
    });
    expect(tailZeroBytes).toBe(0);
    reader.close();
  });

  it('refuses a missing pod with 404 and the API server message', async () => {
    const reader = new PodLogHttp(kc);
    const failure = await reader
      .read(request({ pod: 'no-such-pod' }), new AbortController().signal, () => undefined)
      .then(
        () => undefined,
        (err: unknown) => err,
      );
    expect(failure).toBeInstanceOf(PodLogRequestError);
    expect((failure as PodLogRequestError).statusCode).toBe(404);
    expect((failure as PodLogRequestError).message).toMatch(
      /HTTP 404: pods "no-such-pod" not found/,
    );
    reader.close();
  });

  it('refuses bad credentials with 401 or 403, naming the status', async () => {
    const stranger = new KubeConfig();
    const cluster = kc.getCurrentCluster();
    if (!cluster) throw new Error('the test kubeconfig has no cluster');
    stranger.loadFromOptions({
      clusters: [cluster],
      users: [{ name: 'stranger', token: 'not-a-valid-token' }],
      contexts: [{ name: 'stranger', cluster: cluster.name, user: 'stranger' }],
      currentContext: 'stranger',
    });
    const reader = new PodLogHttp(stranger);
    const failure = await reader
      .read(request(), new AbortController().signal, () => undefined)
      .then(
        () => undefined,
        (err: unknown) => err,
      );
    expect(failure).toBeInstanceOf(PodLogRequestError);
    expect([401, 403]).toContain((failure as PodLogRequestError).statusCode);
    expect((failure as Error).message).toMatch(/HTTP 40[13]/);
    reader.close();
  });

  it('ends a followed stream quietly when aborted, after delivering what it read', async () => {
    const reader = new PodLogHttp(kc);
    const controller = new AbortController();
    let bytes = 0;
    const reading = reader.read(request({ follow: true }), controller.signal, (chunk) => {
      bytes += chunk.length;
    });
    await eventually(
      'the followed log to deliver its lines',
      () => Promise.resolve(bytes > LINES * 10 || undefined),
      { timeoutMs: 30_000, intervalMs: 100 },
    );
    controller.abort();
    await expect(reading).resolves.toBeUndefined();
    expect(bytes).toBeGreaterThan(LINES * 10);
    reader.close();
  });
});
