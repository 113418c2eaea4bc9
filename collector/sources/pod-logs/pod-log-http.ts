// `pods/log` over node:http2 or node:http(s) directly, the body handed to the caller chunk by
// chunk.
//
// Why not client-node's `Log`: a followed log arrives in small pieces (the kubelet writes line
// by line and the API server flushes every write: 100-200 bytes a chunk), so the cost per chunk
// decides the collector's CPU. `Log` pipes node-fetch's body stream into a caller's stream, and
// each chunk then crossed two PassThrough streams and an async iterator step. Here a chunk goes
// from the stream's 'data' event straight to the caller.
//
// Over TLS without a proxy, each read is an HTTP/2 stream on a small pool of sessions per TLS
// material (h2-sessions.ts): many follow streams share one TLS connection, as client-go's do,
// where each HTTP/1.1 stream was a connection of its own (about 100 KB of TLS buffers and HTTP
// parser each, in the C heap). A server that does not choose h2 (ALPN) is read over HTTP/1.1,
// told once; through a proxy or in plain HTTP, reads stay on HTTP/1.1 with client-node's agent.
// The HTTP/1.1 TLS agent is reused while the kubeconfig's TLS material stays the same (`Log`
// built an agent and a TLS context per request), keeps no idle connection alive (a kept socket
// can race the server's idle close), and every connection, HTTP/2 or not, reuses the material's
// one TLS context (shared/tls-context.ts). Authentication comes from the KubeConfig (token
// files, exec plugins, impersonation), asked at most once a second (kube-credentials.ts):
// client-node reads the CA, certificate and key files at every call, and 200 streams open at
// once.
import http from 'node:http';
import http2, { type ClientHttp2Stream, type IncomingHttpHeaders } from 'node:http2';
import https from 'node:https';
import type { KubeConfig } from '@kubernetes/client-node';
import { AGENT_VERSION } from '../../../shared/version.js';
import type { LogRequest } from './kube-access.js';
import { systemClock, type Clock } from '../../../shared/clock.js';
import { createKubeCredentials, type KubeCredentials } from '../../kube-credentials.js';
import {
  sameTlsMaterial,
  tlsAgentOptions,
  tlsMaterial,
  type TlsMaterial,
} from '../../../shared/tls-context.js';
import { TurnBudget, type PausableStream } from './turn-budget.js';
import { SessionPool, type SessionLease, type SessionPoolOptions } from './h2-sessions.js';

/** What the client logs: once, when a server does not speak HTTP/2. */
export interface PodLogHttpLogger {
  warn(fields: Record<string, unknown>, message: string): void;
}

/** A refused log request; `statusCode` is what errorCode() reads (403, 404, 400...). */
export class PodLogRequestError extends Error {
  readonly statusCode: number;
  constructor(statusCode: number, message: string) {
    super(message);
    this.name = 'PodLogRequestError';
    this.statusCode = statusCode;
  }
}

/** Error bodies are small Status objects; a larger one is cut here. */
const MAX_ERROR_BODY_BYTES = 64 * 1024;
const USER_AGENT = `kubexa-agent/${AGENT_VERSION} (collector; pod-logs)`;

/** client-node's agent from applyToHTTPSOptions (an http(s) or proxy agent), if it made one. */
function clientNodeAgent(options: https.RequestOptions): http.Agent | undefined {
  return options.agent instanceof http.Agent ? options.agent : undefined;
}

/** Resolves true when `work` is done, false if `signal` aborts first (work is then ignored). */
async function untilAborted(work: Promise<unknown>, signal: AbortSignal): Promise<boolean> {
  if (signal.aborted) return false;
  let onAbort = (): void => undefined;
  const aborted = new Promise<false>((resolve) => {
    onAbort = () => {
      resolve(false);
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
  try {
    return await Promise.race([work.then(() => !signal.aborted), aborted]);
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
}

const isList = (value: unknown): value is readonly unknown[] => Array.isArray(value);

/** The kubeconfig's headers (Authorization, Impersonate-User...) as an object. */
function headerObject(headers: https.RequestOptions['headers']): http.OutgoingHttpHeaders {
  return headers === undefined || isList(headers) ? {} : headers;
}

export function logUrl(server: string, request: LogRequest): URL {
  const base = server.replace(/\/+$/, '');
  const path = `/api/v1/namespaces/${encodeURIComponent(request.namespace)}/pods/${encodeURIComponent(request.pod)}/log`;
  const url = new URL(base + path);
  const params = url.searchParams;
  params.set('container', request.container);
  params.set('timestamps', 'true');
  if (request.follow) params.set('follow', 'true');
  if (request.previous === true) params.set('previous', 'true');
  // 0 is sent too: "nothing before now", as kubectl --tail=0 (omitted, it is the whole log).
  if (request.tailLines !== undefined && request.tailLines >= 0) {
    params.set('tailLines', String(request.tailLines));
  }
  if (request.sinceTime) params.set('sinceTime', request.sinceTime.toISOString());
  return url;
}

export class PodLogHttp {
  readonly #kc: KubeConfig;
  /** Shared by every read of this client: the time all of them may take in one turn. */
  readonly #budget: TurnBudget;
  /** The kubeconfig's request options, asked at most once a second. */
  readonly #credentials: KubeCredentials;
  #agent: { material: TlsMaterial; agent: http.Agent } | undefined;
  /** The HTTP/2 sessions of the current TLS material and server. */
  #pool: SessionPool | undefined;
  readonly #sessionOptions: SessionPoolOptions;

  constructor(
    kc: KubeConfig,
    budget: TurnBudget = new TurnBudget(),
    {
      clock = systemClock,
      logger,
      sessions = {},
    }: { clock?: Clock; logger?: PodLogHttpLogger; sessions?: SessionPoolOptions } = {},
  ) {
    this.#kc = kc;
    this.#budget = budget;
    this.#credentials = createKubeCredentials(kc, { clock });
    this.#sessionOptions = {
      ...sessions,
      onFallback: (reason) => {
        logger?.warn({ component: 'pod-logs' }, reason);
        sessions.onFallback?.(reason);
      },
    };
  }

  /**
   * Reads one log connection, handing each body chunk to `onChunk` as it arrives. Resolves when
   * the server ends the body or `signal` aborts; rejects with a PodLogRequestError for a
   * non-200 answer, or with the socket's error when the connection is cut.
   */
  async read(
    request: LogRequest,
    signal: AbortSignal,
    onChunk: (chunk: Buffer) => void,
  ): Promise<void> {
    const cluster = this.#kc.getCurrentCluster();
    if (!cluster) throw new Error('the kubeconfig has no current cluster');
    // An exec plugin or a token refresh can hang: the caller's abort (the idle watchdog, a
    // restart, shutdown) must still end the read. The options are shared: never modified here.
    const asked = this.#credentials.options();
    if (!(await untilAborted(asked, signal))) return;
    const options = await asked;
    const url = logUrl(cluster.server, request);
    const plain = url.protocol === 'http:';
    const proxied = cluster.proxyUrl !== undefined && cluster.proxyUrl !== '';
    // Through a proxy or in plain HTTP, client-node's own agent (it speaks the proxy's protocol,
    // or plain HTTP); otherwise an HTTP/2 stream on a session of the material's pool, or one
    // TLS agent kept across requests when the server does not speak HTTP/2.
    if (!proxied && !plain) {
      // A connection being made or a session being pinged can take long: an abort still ends
      // the read at once, and the stream reserved for it is given back when it comes.
      const acquired = this.#poolFor(options, url).acquire();
      if (!(await untilAborted(acquired, signal))) {
        acquired.then(
          (lease) => {
            if (lease !== 'http/1.1') lease.release(false);
          },
          () => undefined,
        );
        return;
      }
      const leased = await acquired;
      if (leased !== 'http/1.1') {
        await this.#readStream(leased, { url, options }, signal, onChunk);
        return;
      }
    }
    const agent = proxied || plain ? clientNodeAgent(options) : this.#tlsAgentFor(options);
    const send = plain ? http.request : https.request;
    await new Promise<void>((resolve, reject) => {
      let body: http.IncomingMessage | undefined;
      /** Set once the read is over: no chunk is handed over after it, even one still queued. */
      let over = false;
      /**
       * Ends the read. Aborted: at once, its queued chunks dropped (the caller has moved on).
       * Otherwise once the chunks queued before the end were handed over, in order.
       */
      const finish = (err?: Error): void => {
        if (over) return;
        this.#endRead({ queued: body, dropQueued: signal.aborted, err, signal }, (failure) => {
          over = true;
          if (failure === undefined) resolve();
          else reject(failure);
        });
      };
      const outgoing = send(
        url,
        {
          method: 'GET',
          agent,
          headers: { ...headerObject(options.headers), 'user-agent': USER_AGENT },
          ...(options.auth === undefined ? {} : { auth: options.auth }),
          signal,
        },
        (response) => {
          if (response.statusCode !== 200) {
            refusal(response, response.statusCode ?? 0).then((err) => {
              if (signal.aborted) resolve();
              else reject(err);
            }, reject);
            return;
          }
          body = response;
          // A throwing consumer ends this connection, not the process.
          const handle = chunkHandler(
            {
              over: () => over,
              end: (err) => {
                over = true;
                this.#budget.forget(response);
                outgoing.destroy();
                reject(err);
              },
            },
            signal,
            onChunk,
          );
          // Handled now, or in a later turn once this one's budget is spent (turn-budget.ts).
          response.on('data', (chunk: Buffer) => {
            this.#budget.offer(response, chunk, handle);
          });
          response.once('error', () => undefined);
          response.once('close', () => {
            // `complete`: the body ended as the server meant it to (the last chunk arrived).
            finish(response.complete ? undefined : new Error('log stream cut before its end'));
          });
        },
      );
      outgoing.once('error', (err) => {
        finish(err);
      });
      outgoing.end();
    });
  }

  /** One read as an HTTP/2 stream of `lease`'s session: the same contract as read(). */
  #readStream(
    lease: SessionLease,
    { url, options }: { url: URL; options: https.RequestOptions },
    signal: AbortSignal,
    onChunk: (chunk: Buffer) => void,
  ): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      let stream: ClientHttp2Stream;
      try {
        stream = lease.session.request(h2Headers(url, options), { endStream: true });
      } catch (err: unknown) {
        // The session went away between acquire and now (a GOAWAY): as a refused connection.
        lease.release(false);
        reject(err instanceof Error ? err : new Error(String(err)));
        return;
      }
      let status: number | undefined;
      let ended = false;
      let failure: Error | undefined;
      /** We closed the stream before its end (abort, a throwing consumer). */
      let cancelled = false;
      /** Set once the read is over: no chunk is handed over after it, even one still queued. */
      let over = false;
      const cancel = (): void => {
        cancelled = true;
        if (!stream.closed) stream.close(http2.constants.NGHTTP2_CANCEL);
      };
      const onAbort = (): void => {
        cancel();
        finish();
      };
      /** As in read(): aborted at once with the queued chunks dropped, else once they are out. */
      const finish = (err?: Error): void => {
        if (over) return;
        const dropQueued = signal.aborted || status !== 200;
        this.#endRead({ queued: stream, dropQueued, err, signal }, (failure) => {
          over = true;
          if (failure === undefined) resolve();
          else reject(failure);
        });
      };
      signal.addEventListener('abort', onAbort, { once: true });
      // A throwing consumer ends this stream, not the process (nor the session).
      const handle = chunkHandler(
        {
          over: () => over,
          end: (err) => {
            over = true;
            this.#budget.forget(stream);
            cancel();
            reject(err);
          },
        },
        signal,
        onChunk,
      );
      stream.once('response', (headers: IncomingHttpHeaders) => {
        status = Number(headers[':status']);
        if (status !== 200) {
          refusal(stream, status).then((err) => {
            over = true;
            if (signal.aborted) resolve();
            else reject(err);
          }, reject);
          return;
        }
        // Handled now, or in a later turn once this one's budget is spent (turn-budget.ts).
        stream.on('data', (chunk: Buffer) => {
          this.#budget.offer(stream, chunk, handle);
        });
      });
      stream.once('end', () => {
        ended = true;
      });
      stream.on('error', (err: Error) => {
        failure ??= err;
      });
      stream.once('close', () => {
        signal.removeEventListener('abort', onAbort);
        lease.release(cancelled);
        if (status === undefined) {
          finish(
            failure ??
              new Error(
                `log stream closed before an answer (HTTP/2 code ${String(stream.rstCode)})`,
              ),
          );
          return;
        }
        // A refusal settles the read once its body was read (refusal above).
        if (status !== 200) return;
        // Ended as the server meant it: END_STREAM, not a reset or a session gone.
        const whole = ended && stream.rstCode === http2.constants.NGHTTP2_NO_ERROR;
        finish(whole ? undefined : new Error('log stream cut before its end'));
      });
      if (signal.aborted) onAbort();
    });
  }

  /** The session pool of this material and server: the current one while neither changed. */
  #poolFor(options: https.RequestOptions, url: URL): SessionPool {
    const material = tlsMaterial(options);
    const cached = this.#pool;
    if (cached?.origin.origin === url.origin && sameTlsMaterial(cached.material, material)) {
      return cached;
    }
    // New material (rotation): new sessions use it, and the streams open on the old sessions
    // run on until they end (the old pool closes its sessions once they have no stream).
    cached?.close();
    const pool = new SessionPool(material, url, this.#sessionOptions);
    this.#pool = pool;
    return pool;
  }

  /** The TLS agent for these options: the cached one while the TLS material is unchanged. */
  #tlsAgentFor(options: https.RequestOptions): http.Agent {
    const material = tlsMaterial(options);
    const cached = this.#agent;
    if (cached && sameTlsMaterial(cached.material, material)) return cached.agent;
    // New material (a rotated client certificate, a new CA): new connections use it, and the
    // streams open on the old agent run on until they end. Every stream's connection reuses the
    // material's one TLS context (shared/tls-context.ts).
    const agent = new https.Agent(tlsAgentOptions(material));
    this.#agent = { material, agent };
    return agent;
  }

  /**
   * How both reads end (HTTP/1.1 and HTTP/2): dropping its queued chunks at once (`dropQueued`:
   * aborted, or no log body) or else once the chunks queued before the end were handed over, in
   * order; then `settle` with the error, none when the read ended cleanly or was aborted.
   */
  #endRead(
    end: {
      readonly queued: PausableStream | undefined;
      readonly dropQueued: boolean;
      readonly err: Error | undefined;
      readonly signal: AbortSignal;
    },
    settle: (failure: Error | undefined) => void,
  ): void {
    const { queued, dropQueued, err, signal } = end;
    const outcome = (): void => {
      settle(err === undefined || signal.aborted ? undefined : err);
    };
    if (dropQueued || queued === undefined) {
      if (queued !== undefined) this.#budget.forget(queued);
      outcome();
      return;
    }
    void this.#budget.settled(queued).then(outcome);
  }

  /**
   * Forgets the TLS agent and closes the HTTP/2 sessions gracefully: streams still open run on
   * until they end, and each session closes after its last stream.
   */
  close(): void {
    this.#agent = undefined;
    this.#pool?.close();
    this.#pool = undefined;
  }
}

/** HTTP/2 names no connection-specific header (RFC 9113 8.2.2): these are never sent. */
const HOP_BY_HOP = new Set([
  'connection',
  'host',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'upgrade',
]);

/** The request's headers as an HTTP/2 request: the same as over HTTP/1.1, names in lower case. */
function h2Headers(url: URL, options: https.RequestOptions): http2.OutgoingHttpHeaders {
  const headers: http2.OutgoingHttpHeaders = {
    ':method': 'GET',
    ':path': url.pathname + url.search,
  };
  for (const [name, value] of Object.entries(headerObject(options.headers))) {
    const lower = name.toLowerCase();
    if (value !== undefined && !HOP_BY_HOP.has(lower)) headers[lower] = value;
  }
  if (options.auth !== undefined && options.auth !== null) {
    headers.authorization = `Basic ${Buffer.from(options.auth).toString('base64')}`;
  }
  headers['user-agent'] = USER_AGENT;
  return headers;
}

/**
 * What a read hands each chunk to (through the turn budget): a chunk that waited in the queue past
 * an abort or the read's end is dropped (the caller may already read the same container again),
 * and a consumer that throws ends the read with its error (`read.end`).
 */
function chunkHandler(
  read: { over(): boolean; end(err: Error): void },
  signal: AbortSignal,
  onChunk: (chunk: Buffer) => void,
): (chunk: Buffer) => void {
  return (chunk) => {
    if (read.over() || signal.aborted) return;
    try {
      onChunk(chunk);
    } catch (err: unknown) {
      read.end(err instanceof Error ? err : new Error(String(err)));
    }
  };
}

/** A PodLogRequestError from a non-200 answer, with the Status message when there is one. */
async function refusal(
  response: AsyncIterable<Buffer>,
  status: number,
): Promise<PodLogRequestError> {
  const parts: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of response) {
      if (size < MAX_ERROR_BODY_BYTES) parts.push(chunk);
      size += chunk.length;
    }
  } catch {
    // A cut error body: the status alone still says what happened.
  }
  const body = Buffer.concat(parts).subarray(0, MAX_ERROR_BODY_BYTES).toString('utf8');
  let message = `pods/log answered HTTP ${String(status)}`;
  let code = status;
  try {
    // A Status object: its own code wins (an API server wraps some kubelet refusals in a 500).
    const parsed = JSON.parse(body) as { message?: unknown; code?: unknown };
    if (typeof parsed.message === 'string' && parsed.message !== '') {
      message = `${message}: ${parsed.message}`;
    }
    if (typeof parsed.code === 'number' && parsed.code >= 400) code = parsed.code;
  } catch {
    if (body.trim() !== '') message = `${message}: ${body.trim().slice(0, 200)}`;
  }
  return new PodLogRequestError(code, message);
}
