// One TLS context per kubeconfig TLS material (shared/tls-context.ts): the watch client, the pod log
// client (HTTP/2 sessions, or a connection per follow stream over HTTP/1.1) and the live query client open many connections to
// the API server, and none of them builds a TLS context of its own. Counted on a real HTTPS
// server with the test CA: Node's tls.createSecureContext, which tls.connect calls for every
// connection not given a context, is wrapped to count the client contexts built. A rewritten CA
// file (new material, as after a rotation) gets one new context, and requests keep working.
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import tls from 'node:tls';
import { KubeConfig } from '@kubernetes/client-node';
import { afterEach, describe, expect, it } from 'vitest';
import { TLS_FIXTURES } from '../test/helpers/gateway-harness.js';
import { CREDENTIALS_MAX_AGE_MS } from './kube-credentials.js';
import { createKubeRest } from './query/kube-rest.js';
import { PodLogHttp } from './sources/pod-logs/pod-log-http.js';
import { KubeHttp } from './watch/kube-http.js';

const REQUESTS = 3;

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** Counts the client TLS contexts built from now on (the server's own is built before). */
function countContexts(): { readonly built: () => number } {
  const original = tls.createSecureContext;
  let built = 0;
  tls.createSecureContext = (options?: tls.SecureContextOptions): tls.SecureContext => {
    built++;
    return original(options);
  };
  cleanups.push(() => {
    tls.createSecureContext = original;
  });
  return { built: () => built };
}

async function startApiServer(): Promise<{ port: number; connections: () => number }> {
  let connections = 0;
  const server: Server = createServer(
    { cert: TLS_FIXTURES.cert, key: TLS_FIXTURES.key },
    (req, res) => {
      if (req.url?.includes('/log?') === true) {
        res.end('2026-12-05T00:00:00Z a line\n');
        return;
      }
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ items: [], metadata: {} }));
    },
  );
  server.on('secureConnection', () => {
    connections++;
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  cleanups.push(async () => {
    server.closeAllConnections();
    server.close();
    await once(server, 'close');
  });
  return { port: (server.address() as AddressInfo).port, connections: () => connections };
}

describe('TLS contexts of the API clients', () => {
  it('every connection of the three clients shares one context per CA file content', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kubexa-tls-context-'));
    cleanups.push(() => {
      rmSync(dir, { recursive: true, force: true });
    });
    const caPath = join(dir, 'ca.pem');
    const ca = readFileSync(TLS_FIXTURES.caPath, 'utf8');
    // A line before the PEM block (OpenSSL skips it): material no other test has used.
    writeFileSync(caPath, `first ${dir}\n${ca}`);
    const api = await startApiServer();
    const kube = new KubeConfig();
    kube.loadFromOptions({
      clusters: [{ name: 'c', server: `https://127.0.0.1:${String(api.port)}`, caFile: caPath }],
      users: [{ name: 'u', token: 'token-0123456789' }],
      contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
      currentContext: 'x',
    });
    const watch = new KubeHttp(kube);
    const logs = new PodLogHttp(kube);
    const rest = createKubeRest(kube);
    cleanups.push(() => {
      watch.close();
      logs.close();
      rest.close();
    });
    const signal = new AbortController().signal;
    const round = async (): Promise<string[]> => {
      const lines: string[] = [];
      for (let i = 0; i < REQUESTS; i++) {
        await watch.getJson({ path: '/api/v1/namespaces' }, signal);
        await logs.read(
          { namespace: 'shop', pod: `web-${String(i)}`, container: 'app', follow: true },
          signal,
          (chunk) => lines.push(chunk.toString('utf8')),
        );
        const answer = await rest.request({
          method: 'GET',
          path: '/api/v1/pods',
          maxBodyBytes: 1024,
          signal,
        });
        expect(answer.status).toBe(200);
      }
      return lines;
    };

    const contexts = countContexts();
    expect(await round()).toEqual(Array(REQUESTS).fill('2026-12-05T00:00:00Z a line\n'));
    // At least a connection per client: the watch and query clients' kept-alive ones, and the
    // log client's HTTP/2 session (each read a stream of it).
    expect(api.connections()).toBeGreaterThanOrEqual(3);
    expect(contexts.built()).toBe(1);

    // New CA file content: the clients read it within a second and build one new context.
    writeFileSync(caPath, `second ${dir}\n${ca}`);
    await sleep(CREDENTIALS_MAX_AGE_MS + 100);
    expect(await round()).toHaveLength(REQUESTS);
    expect(contexts.built()).toBe(2);
  });
});
