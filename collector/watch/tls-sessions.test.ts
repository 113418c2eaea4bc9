// An idle collector's CPU: its periodic API requests (metrics.k8s.io scrapes every 30 s, the
// kubelet's /readyz probes, workload owner lookups, queries) go over the kept-alive connections
// of one agent for every client, so after the first request there is no TLS handshake at all
// (client-node's typed clients made a new TLS context and a full handshake per request; until
// 2026-12-05 each request here was a new connection that resumed its TLS session). Counted on a real HTTPS server with the
// test CA: connections, and how many handshakes were full and how many resumed. Then what keeping
// connections alive must not break: a connection the server closed while it idled is retried
// once, an idle free connection is closed by the client, an open watch is never cut for idling.
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer, type Server } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import type { KubeConfig } from '@kubernetes/client-node';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { TLS_FIXTURES } from '../../test/helpers/gateway-harness.js';
import { singleClusterKubeConfig } from '../../test/helpers/kube.js';
import { createClusterProbe } from '../collector.js';
import { CREDENTIALS_MAX_AGE_MS } from '../kube-credentials.js';
import { kubeMetricsApi } from '../sources/metrics/metrics-api.js';
import { createKubeRest } from '../query/kube-rest.js';
import { kubePodLogAccess } from '../sources/pod-logs/kube-access.js';
import { KubeHttp } from './kube-http.js';

const REQUESTS = 4;

interface ApiServer {
  readonly kube: KubeConfig;
  readonly handshakes: { full: number; resumed: number };
  readonly paths: string[];
  /** The server side of every TCP connection, in the order they came. */
  readonly connections: Socket[];
}

/** Answers one request; the default sends an empty list. */
type Handler = (req: IncomingMessage, res: ServerResponse) => void;

const emptyList: Handler = (_req, res) => {
  res.setHeader('content-type', 'application/json');
  res.end(JSON.stringify({ items: [], metadata: { uid: 'u' } }));
};

const servers: Server[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    server.close();
    await once(server, 'close');
  }
});

async function startApiServer(
  handler: Handler = emptyList,
  caFile: string = TLS_FIXTURES.caPath,
): Promise<ApiServer> {
  const handshakes = { full: 0, resumed: 0 };
  const paths: string[] = [];
  const connections: Socket[] = [];
  const server = createServer({ cert: TLS_FIXTURES.cert, key: TLS_FIXTURES.key }, (req, res) => {
    paths.push(req.url ?? '');
    handler(req, res);
  });
  server.on('connection', (socket: Socket) => connections.push(socket));
  // As the API server (90 s): Node's default of 5 s would close idle connections for the client.
  server.keepAliveTimeout = 90_000;
  server.on('secureConnection', (socket: TLSSocket) => {
    if (socket.isSessionReused()) handshakes.resumed++;
    else handshakes.full++;
  });
  servers.push(server);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  const kube = singleClusterKubeConfig({
    server: `https://127.0.0.1:${String(port)}`,
    token: 'token-0123456789',
    caFile,
  });
  return { kube, handshakes, paths, connections };
}

describe('periodic API requests keep one connection alive', () => {
  it('metrics.k8s.io scrapes: one connection, one handshake', async () => {
    const api = await startApiServer();
    const metrics = kubeMetricsApi(api.kube);
    const signal = new AbortController().signal;
    for (let i = 0; i < REQUESTS; i++) await metrics.listNodeMetrics(signal);
    expect(api.paths).toHaveLength(REQUESTS);
    expect(api.connections).toHaveLength(1);
    expect(api.handshakes).toEqual({ full: 1, resumed: 0 });
  });

  it("the readiness probe of API access (the kubelet's /readyz): one full handshake", async () => {
    const api = await startApiServer();
    const probe = createClusterProbe(api.kube);
    for (let i = 0; i < REQUESTS; i++) await probe.listOneNamespace();
    expect(api.paths).toEqual(Array(REQUESTS).fill('/api/v1/namespaces?limit=1'));
    expect(api.connections).toHaveLength(1);
    expect(api.handshakes).toEqual({ full: 1, resumed: 0 });
  });

  it('workload owner lookups of the pod log source: one full handshake', async () => {
    const api = await startApiServer();
    const { owners } = kubePodLogAccess(api.kube);
    for (let i = 0; i < REQUESTS; i++) {
      await owners('ReplicaSet', 'shop', `web-${String(i)}`, new AbortController().signal);
    }
    expect(api.paths[0]).toBe('/apis/apps/v1/namespaces/shop/replicasets/web-0');
    expect(api.connections).toHaveLength(1);
    expect(api.handshakes).toEqual({ full: 1, resumed: 0 });
  });

  it("the collector's clients of one KubeConfig share it: one connection, one handshake", async () => {
    // Each client had an agent of its own: a periodic GET of one opened a connection and made
    // a full handshake while another's kept-alive connection idled. The query and catalog
    // client (kube-rest.ts) sends over the same agent.
    const api = await startApiServer();
    const metrics = kubeMetricsApi(api.kube);
    const probe = createClusterProbe(api.kube);
    const { owners } = kubePodLogAccess(api.kube);
    const rest = createKubeRest(api.kube);
    const signal = new AbortController().signal;
    for (let i = 0; i < REQUESTS; i++) {
      await metrics.listNodeMetrics(signal);
      await probe.listOneNamespace();
      await owners('ReplicaSet', 'shop', `web-${String(i)}`, signal);
      await rest.request({ method: 'GET', path: '/api', maxBodyBytes: 1024, signal });
    }
    expect(api.paths).toHaveLength(4 * REQUESTS);
    expect(api.connections).toHaveLength(1);
    expect(api.handshakes).toEqual({ full: 1, resumed: 0 });
  });
});

describe('kept-alive connections (KubeHttp)', () => {
  const signal = new AbortController().signal;

  it('a GET on a connection the server closed while it idled goes once more, on a new one', async () => {
    // The server answers the first request of a connection and drops any later one unanswered:
    // what a client sees when its request crosses the server's idle close.
    const served = new WeakSet<Socket>();
    const api = await startApiServer((req, res) => {
      if (served.has(req.socket)) {
        req.socket.destroy();
        return;
      }
      served.add(req.socket);
      emptyList(req, res);
    });
    const http = new KubeHttp(api.kube);
    try {
      await http.getJson({ path: '/api/v1/namespaces' }, signal);
      await expect(http.getJson({ path: '/api/v1/pods' }, signal)).resolves.toEqual({
        items: [],
        metadata: { uid: 'u' },
      });
      // The dropped request, then its retry on a second connection.
      expect(api.paths).toEqual(['/api/v1/namespaces', '/api/v1/pods', '/api/v1/pods']);
      expect(api.connections).toHaveLength(2);
    } finally {
      http.close();
    }
  });

  it('finds its agent by comparing the TLS material, never by serializing it', async () => {
    // JSON.stringify calls a Buffer's toJSON (an array of every byte) before any replacer sees
    // it: a key built that way cost a thousand calls for a CA of 1 KB on every request, enough
    // for V8 to optimize them with TurboFan in an idle minute (6 MiB resident of compiler code).
    const api = await startApiServer();
    const http = new KubeHttp(api.kube);
    const toJson = vi.spyOn(Buffer.prototype, 'toJSON');
    try {
      for (let i = 0; i < REQUESTS; i++) await http.getJson({ path: '/api/v1/pods' }, signal);
      // The kubeconfig's files are read again after a second: new Buffers, the same bytes, the
      // same agent and connection.
      await sleep(CREDENTIALS_MAX_AGE_MS + 100);
      await http.getJson({ path: '/api/v1/pods' }, signal);
      expect(api.paths).toHaveLength(REQUESTS + 1);
      expect(api.connections).toHaveLength(1);
      expect(toJson).not.toHaveBeenCalled();
    } finally {
      toJson.mockRestore();
      http.close();
    }
  });

  it("a GET dropped on a new connection is not retried: the error is the caller's", async () => {
    const api = await startApiServer((req) => req.socket.destroy());
    const http = new KubeHttp(api.kube);
    try {
      await expect(http.getJson({ path: '/api/v1/pods' }, signal)).rejects.toThrow();
      expect(api.paths).toEqual(['/api/v1/pods']);
    } finally {
      http.close();
    }
  });

  it('closes a connection that idled in its pool past the free socket timeout', async () => {
    const api = await startApiServer();
    const http = new KubeHttp(api.kube, { freeSocketTimeoutMs: 200 });
    try {
      await http.getJson({ path: '/api/v1/namespaces' }, signal);
      const [connection] = api.connections;
      if (connection === undefined) throw new Error('no connection');
      // The client ends it: the server sees its end of the stream.
      await once(connection, 'close');
      await http.getJson({ path: '/api/v1/namespaces' }, signal);
      expect(api.connections).toHaveLength(2);
    } finally {
      http.close();
    }
  });

  it('the query and catalog client closes its idle connections too', async () => {
    const api = await startApiServer();
    const http = new KubeHttp(api.kube, { freeSocketTimeoutMs: 200 });
    const rest = createKubeRest(api.kube, { http });
    const get = () =>
      rest.request({ method: 'GET', path: '/api/v1/pods', maxBodyBytes: 1024, signal });
    try {
      await get();
      const [connection] = api.connections;
      if (connection === undefined) throw new Error('no connection');
      await once(connection, 'close');
      expect((await get()).status).toBe(200);
      expect(api.connections).toHaveLength(2);
    } finally {
      http.close();
    }
  });

  it('a rotated CA file gets a new agent; a request still on the old one completes', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kubexa-rest-rotation-'));
    const caPath = join(dir, 'ca.pem');
    const ca = readFileSync(TLS_FIXTURES.caPath, 'utf8');
    writeFileSync(caPath, ca);
    const slowMs = CREDENTIALS_MAX_AGE_MS + 600;
    const api = await startApiServer((req, res) => {
      if (req.url === '/slow') {
        setTimeout(() => {
          emptyList(req, res);
        }, slowMs).unref();
      } else emptyList(req, res);
    }, caPath);
    const rest = createKubeRest(api.kube);
    const get = (path: string) => rest.request({ method: 'GET', path, maxBodyBytes: 1024, signal });
    try {
      const slow = get('/slow').then(
        (answer) => answer.status,
        (error: unknown) => String(error),
      );
      // New CA file content (a line before the PEM block, which OpenSSL skips): new material.
      writeFileSync(caPath, `rotated\n${ca}`);
      await sleep(CREDENTIALS_MAX_AGE_MS + 100);
      expect((await get('/fast')).status).toBe(200);
      expect(await slow).toBe(200);
      expect(api.connections).toHaveLength(2);
    } finally {
      rest.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('never cuts an open watch that idles longer than the free socket timeout', async () => {
    const quietMs = 1_000;
    const api = await startApiServer((_req, res) => {
      res.setHeader('content-type', 'application/json');
      res.write('{"type":"ADDED"}\n');
      setTimeout(() => res.end('{"type":"DELETED"}\n'), quietMs).unref();
    });
    const http = new KubeHttp(api.kube, { freeSocketTimeoutMs: quietMs / 5 });
    const lines: string[] = [];
    try {
      await http.stream({ path: '/api/v1/pods?watch=1' }, signal, (line) => lines.push(line));
      expect(lines).toEqual(['{"type":"ADDED"}', '{"type":"DELETED"}']);
      expect(api.connections).toHaveLength(1);
    } finally {
      http.close();
    }
  });
});
