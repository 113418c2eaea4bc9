// An HTTPS proxy in front of the test API server that terminates TLS (the fixture certificate),
// so it sees in the clear every request a client makes and every byte the API server answers.
// The record is the API server's side of "this never reached the client": a test asserts a
// canary is absent from what was answered, not from what the client chose to keep. Clients
// authenticate with a bearer token, which the proxy passes on untouched (a client certificate
// would end at the proxy).
import { request as httpsRequest } from 'node:https';
import { gunzipSync } from 'node:zlib';
import type { KubeConfig } from '@kubernetes/client-node';
import { createProxyServer, forwardable, listenProxy, upstreamOf } from './api-server-proxy.js';

export interface RecordedExchange {
  readonly method: string;
  readonly path: string;
  readonly accept: string;
  readonly status: number;
  /** The answer's body as the client received it, decompressed when it was gzipped. */
  readonly body: Buffer;
}

export interface RecordingProxy {
  /** Every exchange completed through the proxy, in order. */
  readonly exchanges: RecordedExchange[];
  /** Every request as it arrived (a watch is here while it runs), in order. */
  readonly requests: { readonly method: string; readonly path: string }[];
  /** A KubeConfig that reaches the API server through the proxy with this bearer token. */
  kubeConfigFor(token: string): KubeConfig;
  close(): Promise<void>;
}

/** What the proxy answers itself instead of the API server (a status and a JSON body). */
export type ProxyAnswer = (
  method: string,
  path: string,
  accept: string,
) => { readonly status: number; readonly body: object } | undefined;

/**
 * `admin` names the API server and its CA; its own credentials are never used. `answer` may
 * answer a request itself (recorded like the others): an API group the server does not serve.
 */
export async function startRecordingProxy(
  admin: KubeConfig,
  answer: ProxyAnswer = () => undefined,
): Promise<RecordingProxy> {
  const upstream = upstreamOf(admin);
  const exchanges: RecordedExchange[] = [];
  const requests: { method: string; path: string }[] = [];
  const server = createProxyServer((incoming, outgoing) => {
    const path = incoming.url ?? '/';
    requests.push({ method: incoming.method ?? '', path });
    const own = answer(incoming.method ?? '', path, incoming.headers.accept ?? '');
    if (own !== undefined) {
      const body = Buffer.from(JSON.stringify(own.body));
      exchanges.push({
        method: incoming.method ?? '',
        path,
        accept: incoming.headers.accept ?? '',
        status: own.status,
        body,
      });
      incoming.resume();
      outgoing.writeHead(own.status, { 'content-type': 'application/json' }).end(body);
      return;
    }
    const forwarded = httpsRequest(
      { ...upstream, method: incoming.method, path, headers: forwardable(incoming.headers) },
      (answer) => {
        const chunks: Buffer[] = [];
        answer.on('data', (chunk: Buffer) => chunks.push(chunk));
        answer.once('end', () => {
          const raw = Buffer.concat(chunks);
          exchanges.push({
            method: incoming.method ?? '',
            path,
            accept: incoming.headers.accept ?? '',
            status: answer.statusCode ?? 0,
            body: answer.headers['content-encoding'] === 'gzip' ? gunzipSync(raw) : raw,
          });
        });
        outgoing.writeHead(answer.statusCode ?? 502, forwardable(answer.headers));
        answer.pipe(outgoing);
      },
    );
    forwarded.once('error', (err) => {
      outgoing.destroy(err);
    });
    incoming.pipe(forwarded);
  });
  const listening = await listenProxy(server, 'recorded');
  return {
    exchanges,
    requests,
    kubeConfigFor: (token) => listening.kubeConfigFor(token),
    close: () => listening.close(),
  };
}
