// The executor's token liveness probe (executor/identity/token-liveness.ts) after the API server's
// CA is rotated. A TLS-terminating proxy in front of the real API server plays the API server's
// TLS side with certificates of two throwaway CAs (test/helpers/test-ca.ts); the probe's
// kubeconfig names its CA by file, as the in-cluster service account's ca.crt is, and the file is
// rewritten as a rotation rewrites it. The SelfSubjectReviews reach the real API server with a
// real ServiceAccount token.
import { once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import {
  selfSubjectReviewProbe,
  type TokenLivenessProbe,
} from '../../executor/identity/token-liveness.js';
import { forwardRequest, upstreamOf } from '../helpers/api-server-proxy.js';
import {
  createTestNamespace,
  eventually,
  loadKubeConfig,
  singleClusterKubeConfig,
  type TestNamespace,
} from '../helpers/kube.js';
import { createTestCa, type TestCa } from '../helpers/test-ca.js';

const admin = loadKubeConfig(inject('kubeconfigPath'));
const core = admin.makeApiClient(CoreV1Api);

let ns: TestNamespace;
let dir: string;
let caOne: TestCa;
let caTwo: TestCa;
/** A real token of a ServiceAccount with no grants (a SelfSubjectReview needs none). */
let token: string;

/** The API server's TLS side: serves `ca`'s certificate, switched by `serve`. */
interface RotatingProxy {
  readonly port: number;
  /** Open client connections, as the server sees them. */
  readonly open: Set<TLSSocket>;
  /** Serves `ca`'s certificate from now on and drops every connection, as a restart would. */
  serve(ca: TestCa): void;
  close(): Promise<void>;
}

async function startRotatingProxy(ca: TestCa): Promise<RotatingProxy> {
  const upstream = upstreamOf(admin);
  const server: Server = createServer(
    { cert: ca.serverCertPem, key: ca.serverKeyPem },
    (req, res) => {
      forwardRequest(upstream, req, res);
    },
  );
  // Idle connections stay open until a side closes them (the default closes them after 5 s).
  server.keepAliveTimeout = 0;
  const open = new Set<TLSSocket>();
  server.on('secureConnection', (socket: TLSSocket) => {
    open.add(socket);
    socket.once('close', () => open.delete(socket));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const drop = () => {
    for (const socket of open) socket.destroy();
    server.closeAllConnections();
  };
  return {
    port: (server.address() as AddressInfo).port,
    open,
    serve(next) {
      server.setSecureContext({ cert: next.serverCertPem, key: next.serverKeyPem });
      drop();
    },
    async close() {
      drop();
      server.close();
      await once(server, 'close');
    },
  };
}

/** The executor's kubeconfig shape: the server, a CA file, its own token (never sent). */
const probeKubeConfig = (port: number, caPath: string) =>
  singleClusterKubeConfig({
    server: `https://127.0.0.1:${String(port)}`,
    caFile: caPath,
    token: 'the-executors-own-token',
  });

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'kubexa-ca-rotation-'));
  caOne = createTestCa(dir, 'ca-one');
  caTwo = createTestCa(dir, 'ca-two');
  ns = await createTestNamespace(admin, 'liveness-ca');
  await core.createNamespacedServiceAccount({
    namespace: ns.name,
    body: { metadata: { name: 'probed' } },
  });
  const minted = await core.createNamespacedServiceAccountToken({
    name: 'probed',
    namespace: ns.name,
    body: { spec: { audiences: [], expirationSeconds: 3600 } },
  });
  token = minted.status?.token ?? '';
  expect(token).not.toBe('');
});

afterAll(async () => {
  await ns.delete();
  await rm(dir, { recursive: true, force: true });
});

async function setUp(caFileText: string): Promise<{
  proxy: RotatingProxy;
  probe: TokenLivenessProbe;
  caPath: string;
}> {
  const proxy = await startRotatingProxy(caOne);
  cleanups.push(() => proxy.close());
  const caPath = join(await mkdtemp(join(dir, 'kube-')), 'ca.crt');
  await writeFile(caPath, caFileText);
  const probe = selfSubjectReviewProbe(probeKubeConfig(proxy.port, caPath));
  cleanups.push(() => {
    probe.close();
  });
  return { proxy, probe, caPath };
}

describe('the token liveness probe after a CA rotation', () => {
  it('verifies the API server against the CA file as it is at each check, not as it was at the first', async () => {
    const { proxy, probe, caPath } = await setUp(caOne.caPem);
    const signal = new AbortController().signal;
    expect(await probe.check(token, signal)).toBe('alive');
    expect(await probe.check('not-a-token', signal)).toBe('refused');

    // The API server now serves a certificate of CA 2; the kubeconfig still names CA 1, so the
    // new certificate is refused: no verdict, and proof that the server did switch. The first
    // check may still pick the kept-alive connection the server just dropped (no verdict
    // either); the second connects anew.
    proxy.serve(caTwo);
    expect(await probe.check(token, signal)).toBe('unknown');
    expect(await probe.check(token, signal)).toBe('unknown');

    // The CA file rotated: the next check trusts CA 2.
    await writeFile(caPath, caTwo.caPem);
    expect(await probe.check(token, signal)).toBe('alive');
    expect(await probe.check('not-a-token', signal)).toBe('refused');
  });

  it('closes the old agent’s kept-alive connection when the CA file changes', async () => {
    const { proxy, probe, caPath } = await setUp(caOne.caPem);
    const signal = new AbortController().signal;
    expect(await probe.check(token, signal)).toBe('alive');
    // One kept-alive connection between checks.
    expect(proxy.open.size).toBe(1);
    const [first] = [...proxy.open];
    // The first step of a rotation: both CAs in the file, the server still on CA 1.
    await writeFile(caPath, caOne.caPem + caTwo.caPem);
    expect(await probe.check(token, signal)).toBe('alive');
    await eventually(
      'the old agent’s connection to close',
      () => Promise.resolve(first !== undefined && !proxy.open.has(first) ? true : undefined),
      { timeoutMs: 10_000 },
    );
    expect(proxy.open.size).toBe(1);
    // The server moves to CA 2: the bundle trusts it. The first check may pick the kept-alive
    // connection the server just dropped (no verdict); the second connects anew.
    proxy.serve(caTwo);
    expect(['alive', 'unknown']).toContain(await probe.check(token, signal));
    expect(await probe.check(token, signal)).toBe('alive');
  });
});
