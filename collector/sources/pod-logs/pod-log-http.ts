// `pods/log` over node:http(s) directly, the body handed to the caller chunk by chunk.
//
// Why not client-node's `Log`: a followed log arrives in small pieces (the kubelet writes line
// by line and the API server flushes every write: 100-200 bytes a chunk), so the cost per chunk
// decides the collector's CPU. `Log` pipes node-fetch's body stream into a caller's stream, and
// each chunk then crossed two PassThrough streams and an async iterator step. Here a chunk goes
// from the socket's 'data' event straight to the caller. `Log` also builds a new https.Agent,
// and with it a new TLS context (CA, client key), for every request; the agent here is reused
// while the kubeconfig's TLS material stays the same, and every connection reuses the material's
// one TLS context (shared/tls-context.ts). It keeps no idle connection alive: a kept socket can race the
// server's idle close. Authentication comes from the KubeConfig (token files, exec plugins,
// impersonation), asked at most once a second (kube-credentials.ts): client-node reads the CA,
// certificate and key files at every call, and 200 streams open at once.
import http from 'node:http';
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
import { TurnBudget } from './turn-budget.js';

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

  constructor(
    kc: KubeConfig,
    budget: TurnBudget = new TurnBudget(),
    { clock = systemClock }: { clock?: Clock } = {},
  ) {
    this.#kc = kc;
    this.#budget = budget;
    this.#credentials = createKubeCredentials(kc, { clock });
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
    // or plain HTTP); otherwise one TLS agent kept across requests.
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
        const queued = body;
        if (signal.aborted || queued === undefined) {
          over = true;
          if (queued) this.#budget.forget(queued);
          if (err === undefined || signal.aborted) resolve();
          else reject(err);
          return;
        }
        void this.#budget.settled(queued).then(() => {
          over = true;
          if (err === undefined || signal.aborted) resolve();
          else reject(err);
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
            refusal(response).then((err) => {
              if (signal.aborted) resolve();
              else reject(err);
            }, reject);
            return;
          }
          body = response;
          const handle = (chunk: Buffer): void => {
            // A chunk that waited in the queue past an abort or the read's end is dropped: the
            // caller may already read the same container on a new connection.
            if (over || signal.aborted) return;
            try {
              onChunk(chunk);
            } catch (err: unknown) {
              // A throwing consumer ends this connection, not the process.
              over = true;
              this.#budget.forget(response);
              outgoing.destroy();
              reject(err instanceof Error ? err : new Error(String(err)));
            }
          };
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

  /** Forgets the TLS agent; streams still open on it run on until they end. */
  close(): void {
    this.#agent = undefined;
  }
}

/** A PodLogRequestError from a non-200 answer, with the Status message when there is one. */
async function refusal(response: http.IncomingMessage): Promise<PodLogRequestError> {
  const status = response.statusCode ?? 0;
  const parts: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of response as AsyncIterable<Buffer>) {
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
