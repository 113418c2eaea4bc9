// Raw reads and reviews against the API server over node:https, bytes in and bytes out. The
// query path needs the body as bytes (the size caps count them, and numbers must survive
// exactly, see lossless-json.ts), the Table Accept header, and a connection kept warm between
// queries: a TLS handshake per query would cost more than the whole query otherwise does.
// Authentication comes from the KubeConfig, asked at most once a second (kube-credentials.ts:
// client-node reads the certificate files on every call; token files rotate, exec plugins expire).
import http from 'node:http';
import https from 'node:https';
import type { KubeConfig } from '@kubernetes/client-node';
import type { Clock } from '../../shared/clock.js';
import {
  sameTlsMaterial,
  tlsAgentOptions,
  tlsMaterial,
  type TlsMaterial,
} from '../../shared/tls-context.js';
import { AGENT_VERSION } from '../../shared/version.js';
import { createKubeCredentials } from '../kube-credentials.js';
import { FREE_SOCKET_TIMEOUT_MS } from '../watch/kube-http.js';

const USER_AGENT = `kubexa-agent/${AGENT_VERSION} (collector; query)`;
/** Connections kept per API server: the query gate runs 4 at once, the catalog 8 reviews. */
const MAX_SOCKETS = 16;

export interface RestResponse {
  readonly status: number;
  readonly contentType: string;
  readonly body: Buffer;
}

/** The answer's body went over the caller's byte limit; nothing more was read. */
export class BodyTooLargeError extends Error {
  readonly limit: number;
  constructor(limit: number) {
    super(`the API server's answer is over ${limit} bytes`);
    this.name = 'BodyTooLargeError';
    this.limit = limit;
  }
}

export interface RestRequest {
  readonly method: 'GET' | 'POST';
  /** Path and query, e.g. /api/v1/namespaces/a/pods?limit=5. */
  readonly path: string;
  readonly accept?: string;
  readonly body?: Buffer;
  /** The body is read up to this many bytes; more rejects with BodyTooLargeError. */
  readonly maxBodyBytes: number;
  readonly signal: AbortSignal;
}

export interface KubeRest {
  request(request: RestRequest): Promise<RestResponse>;
  close(): void;
}

function headerObject(headers: https.RequestOptions['headers']): http.OutgoingHttpHeaders {
  const isList = (value: unknown): value is readonly unknown[] => Array.isArray(value);
  return headers === undefined || isList(headers) ? {} : headers;
}

export function createKubeRest(
  kube: KubeConfig,
  deps: {
    clock?: Clock;
    /** For tests (FREE_SOCKET_TIMEOUT_MS otherwise). */
    freeSocketTimeoutMs?: number;
  } = {},
): KubeRest {
  const credentials = createKubeCredentials(kube, deps);
  let cached: { material: TlsMaterial; agent: https.Agent } | undefined;
  const agentFor = (options: Readonly<https.RequestOptions>): https.Agent => {
    const material = tlsMaterial(options);
    if (cached && sameTlsMaterial(cached.material, material)) return cached.agent;
    // The previous agent is left to wind down, not destroyed: a request still on it (a query, a
    // catalog review) completes, and its free connections close after FREE_SOCKET_TIMEOUT_MS
    // (Node unrefs a free socket, so none holds the process at shutdown).

    // A free connection closes after FREE_SOCKET_TIMEOUT_MS idle, as KubeHttp's: the catalog's
    // access reviews open up to 8 at start, which otherwise idled until the API server closed
    // them (90 s, seen with strace on an idle collector), and a load balancer's shorter idle
    // timeout would cut them under a request.
    const agent = new https.Agent({
      ...tlsAgentOptions(material),
      keepAlive: true,
      maxSockets: MAX_SOCKETS,
      maxFreeSockets: MAX_SOCKETS,
      timeout: deps.freeSocketTimeoutMs ?? FREE_SOCKET_TIMEOUT_MS,
    });
    cached = { material, agent };
    return agent;
  };

  const once = async (request: RestRequest, retryOnReuse: boolean): Promise<RestResponse> => {
    const cluster = kube.getCurrentCluster();
    if (!cluster) throw new Error('the kubeconfig has no current cluster');
    const options = await credentials.options();
    request.signal.throwIfAborted();
    const url = new URL(cluster.server.replace(/\/+$/, '') + request.path);
    const plain = url.protocol === 'http:';
    const proxied = cluster.proxyUrl !== undefined && cluster.proxyUrl !== '';
    const agent =
      proxied || plain
        ? options.agent instanceof http.Agent
          ? options.agent
          : undefined
        : agentFor(options);
    const send = plain ? http.request : https.request;
    return new Promise<RestResponse>((resolve, reject) => {
      const outgoing = send(
        url,
        {
          method: request.method,
          agent,
          headers: {
            ...headerObject(options.headers),
            'user-agent': USER_AGENT,
            accept: request.accept ?? 'application/json',
            ...(request.body === undefined
              ? {}
              : { 'content-type': 'application/json', 'content-length': request.body.length }),
          },
          ...(options.auth === undefined ? {} : { auth: options.auth }),
          signal: request.signal,
        },
        (response) => {
          const chunks: Buffer[] = [];
          let size = 0;
          response.on('data', (chunk: Buffer) => {
            size += chunk.length;
            if (size > request.maxBodyBytes) {
              // The rest is not read: the connection goes, the memory stays bounded.
              outgoing.destroy();
              reject(new BodyTooLargeError(request.maxBodyBytes));
              return;
            }
            chunks.push(chunk);
          });
          response.once('error', reject);
          response.once('end', () => {
            resolve({
              status: response.statusCode ?? 0,
              contentType: response.headers['content-type'] ?? '',
              body: Buffer.concat(chunks, size),
            });
          });
        },
      );
      outgoing.once('error', (err: NodeJS.ErrnoException) => {
        // A kept-alive socket the server closed while idle: one fresh try, for reads only.
        if (retryOnReuse && outgoing.reusedSocket && err.code === 'ECONNRESET') {
          once(request, false).then(resolve, reject);
          return;
        }
        reject(err);
      });
      outgoing.end(request.body);
    });
  };

  return {
    request: (request) => once(request, true),
    close() {
      cached?.agent.destroy();
      cached = undefined;
    },
  };
}
