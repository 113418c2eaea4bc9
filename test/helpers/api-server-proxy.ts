// What every TLS-terminating proxy in front of the test API server shares (recording-proxy.ts,
// holding-proxy.ts, exec-protocol-proxy.ts): where the API server is and how to trust it, which
// headers may cross, the HTTPS server on the fixture certificate, and a KubeConfig that reaches
// the API server through the proxy with a bearer token (a client certificate would end at the
// proxy). Each proxy keeps only what it does to the traffic.
import type {
  IncomingHttpHeaders,
  IncomingMessage,
  RequestListener,
  ServerResponse,
} from 'node:http';
import {
  createServer,
  request as httpsRequest,
  type RequestOptions,
  type Server,
} from 'node:https';
import { readFileSync } from 'node:fs';
import type { Duplex } from 'node:stream';
import { KubeConfig } from '@kubernetes/client-node';
import { TLS_FIXTURES } from './gateway-harness.js';

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'host']);

/** The headers a proxy passes on: all but the hop-by-hop ones. */
export function forwardable(headers: IncomingHttpHeaders): IncomingHttpHeaders {
  return Object.fromEntries(
    Object.entries(headers).filter(([name]) => !HOP_BY_HOP.has(name.toLowerCase())),
  );
}

/**
 * The API server `admin` names, as request options (host, port, its CA). `admin`'s own
 * credentials are never used: clients bring their token, which the proxy passes on.
 */
export function upstreamOf(
  admin: KubeConfig,
): Required<Pick<RequestOptions, 'host' | 'port'>> & RequestOptions {
  const cluster = admin.getCurrentCluster();
  if (cluster === null) throw new Error('the kubeconfig has no current cluster');
  const upstream = new URL(cluster.server);
  const ca =
    cluster.caData !== undefined
      ? Buffer.from(cluster.caData, 'base64')
      : cluster.caFile !== undefined
        ? readFileSync(cluster.caFile)
        : undefined;
  return {
    host: upstream.hostname,
    port: Number(upstream.port || 443),
    ...(ca === undefined ? { rejectUnauthorized: false } : { ca }),
  };
}

/** Passes one request on to `upstream` untouched, and its answer back. */
export function forwardRequest(
  upstream: RequestOptions,
  incoming: IncomingMessage,
  outgoing: ServerResponse,
): void {
  const forwarded = httpsRequest(
    {
      ...upstream,
      method: incoming.method,
      path: incoming.url ?? '/',
      headers: forwardable(incoming.headers),
    },
    (answer) => {
      outgoing.writeHead(answer.statusCode ?? 502, forwardable(answer.headers));
      answer.pipe(outgoing);
    },
  );
  forwarded.once('error', (err) => {
    outgoing.destroy(err);
  });
  incoming.pipe(forwarded);
}

/** An HTTPS server on the fixture certificate (its CA is TLS_FIXTURES.caPath). */
export function createProxyServer(handler: RequestListener): Server {
  return createServer({ cert: TLS_FIXTURES.cert, key: TLS_FIXTURES.key }, handler);
}

export interface ListeningProxy {
  /** A KubeConfig that reaches the API server through the proxy with this bearer token. */
  kubeConfigFor(token: string): KubeConfig;
  /** Destroys `sockets` (upgraded connections the server no longer tracks), then closes. */
  close(sockets?: Iterable<Duplex>): Promise<void>;
}

/** Listens on a free loopback port; `name` names the cluster and context in the KubeConfig. */
export async function listenProxy(server: Server, name: string): Promise<ListeningProxy> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('proxy has no port');
  return {
    kubeConfigFor(token) {
      const kc = new KubeConfig();
      kc.loadFromOptions({
        clusters: [
          {
            name,
            server: `https://127.0.0.1:${String(address.port)}`,
            caFile: TLS_FIXTURES.caPath,
            skipTLSVerify: false,
          },
        ],
        users: [{ name: 'token', token }],
        contexts: [{ name, cluster: name, user: 'token' }],
        currentContext: name,
      });
      return kc;
    },
    async close(sockets = []) {
      for (const socket of sockets) socket.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => {
        server.close(() => {
          resolve();
        });
      });
    },
  };
}
