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
import { AGENT_VERSION } from '../../shared/version.js';
import { createKubeCredentials } from '../kube-credentials.js';
import { kubeHttpFor, type KubeHttp } from '../watch/kube-http.js';

const USER_AGENT = `kubexa-agent/${AGENT_VERSION} (collector; query)`;

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
    /** The connections' client; the process's one for this KubeConfig by default. */
    http?: KubeHttp;
  } = {},
): KubeRest {
  const credentials = createKubeCredentials(kube, deps);
  // The watch client's agent (kube-http.ts): its kept-alive connections, closed after 45 s idle,
  // and its TLS session cache, so the catalog's reviews and the queries reuse a free connection
  // of the watches' periodic GETs or resume the process's TLS session instead of a full
  // handshake each (each client's first connection was one). A rotated CA or client certificate
  // gets a new agent there, and the previous one winds down under the requests still on it.
  const shared = deps.http ?? kubeHttpFor(kube);

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
        : shared.agentFor(options);
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
        // A kept-alive socket the server closed while idle: one fresh try (GETs and access
        // reviews, the only requests sent here, change nothing).
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
      // Nothing of its own to close: the agent is shared, and a free connection in it is unrefed
      // (never holds the process) and closed after 45 s idle.
    },
  };
}
