// Kubernetes API reads over node:http(s) with the KubeConfig's credentials: a JSON GET and a
// streamed watch (one JSON event per line). Why not client-node's Watch and typed lists: every
// call there builds a new https.Agent (a new TLS context), the Accept header cannot ask for
// PartialObjectMetadata (Secrets read as metadata only under security.profile strict), and a
// typed list deserializes into class instances twice the size of the JSON.
import http from 'node:http';
import https from 'node:https';
import type { KubeConfig } from '@kubernetes/client-node';
import {
  sameTlsMaterial,
  tlsAgentOptions,
  tlsMaterial,
  type TlsMaterial,
} from '../../shared/tls-context.js';
import { AGENT_VERSION } from '../../shared/version.js';
import { createKubeCredentials, type KubeCredentials } from '../kube-credentials.js';

/** A refused request; `statusCode` is what errorCode() reads. The message never holds a body. */
export class KubeRequestError extends Error {
  readonly statusCode: number;
  /** The Status message the API server gave (at most 300 characters), or ''. */
  readonly reason: string;
  constructor(statusCode: number, message: string, reason = '') {
    super(message);
    this.name = 'KubeRequestError';
    this.statusCode = statusCode;
    this.reason = reason;
  }
}

/** Full objects, JSON. */
export const ACCEPT_JSON = 'application/json';
/** Metadata only, for a list: PartialObjectMetadataList, never an object's body. */
export const ACCEPT_METADATA_LIST =
  'application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io';
/** Metadata only, for a watch: each event's object is a PartialObjectMetadata. */
export const ACCEPT_METADATA = 'application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io';

const MAX_ERROR_BODY_BYTES = 16 * 1024;
/**
 * How long a kept-alive connection may idle in the agent's pool: longer than the 30 s between
 * periodic GETs, shorter than the API server's idle timeout (90 s) and a load balancer's (often
 * 60 s). Node applies an agent's `timeout` to every socket, but destroys only a free one when it
 * fires; an open watch only sees a `timeout` event nobody listens to.
 */
export const FREE_SOCKET_TIMEOUT_MS = 45_000;
const USER_AGENT = `kubexa-agent/${AGENT_VERSION} (collector; watch)`;

export interface KubeGet {
  readonly path: string;
  readonly query?: Readonly<Record<string, string | undefined>>;
  readonly accept?: string;
}

/** A conditional GET's answer: the document and its ETag, or "unchanged since that ETag". */
export type ConditionalAnswer =
  | { readonly changed: true; readonly body: unknown; readonly etag: string | undefined }
  | { readonly changed: false };

/** What #send got: the status it accepted and the response's ETag. */
interface SentHead {
  readonly status: number;
  readonly etag: string | undefined;
}

export class KubeHttp {
  readonly #kc: KubeConfig;
  /** The kubeconfig's options, asked at most once a second (client-node reads files per call). */
  readonly #credentials: KubeCredentials;
  #agent: { material: TlsMaterial; agent: https.Agent } | undefined;

  readonly #freeSocketTimeoutMs: number;

  /** `freeSocketTimeoutMs` is for tests (FREE_SOCKET_TIMEOUT_MS otherwise). */
  constructor(kc: KubeConfig, options: { readonly freeSocketTimeoutMs?: number } = {}) {
    this.#kc = kc;
    this.#credentials = createKubeCredentials(kc);
    this.#freeSocketTimeoutMs = options.freeSocketTimeoutMs ?? FREE_SOCKET_TIMEOUT_MS;
  }

  /** GETs and parses one JSON document. */
  async getJson(request: KubeGet, signal: AbortSignal): Promise<unknown> {
    const chunks: Buffer[] = [];
    await this.#send(request, signal, (chunk) => chunks.push(chunk));
    return parseJson(Buffer.concat(chunks).toString('utf8'), request.path);
  }

  /**
   * GETs one JSON document unless it still has the ETag `ifNoneMatch` (HTTP 304: no body sent,
   * nothing parsed). The aggregated discovery documents carry an ETag; asking them again every
   * 30 s costs a request and no more while nothing was installed or removed.
   */
  async getJsonIfChanged(
    request: KubeGet,
    ifNoneMatch: string | undefined,
    signal: AbortSignal,
  ): Promise<ConditionalAnswer> {
    const chunks: Buffer[] = [];
    const head = await this.#send(request, signal, (chunk) => chunks.push(chunk), {
      ifNoneMatch,
    });
    if (head.status === 304) return { changed: false };
    const body = parseJson(Buffer.concat(chunks).toString('utf8'), request.path);
    return { changed: true, body, etag: head.etag };
  }

  /**
   * Streams a watch: `onLine` gets each complete line. Resolves when the server ends the body
   * or `signal` aborts.
   */
  async stream(
    request: KubeGet,
    signal: AbortSignal,
    onLine: (line: string) => void,
  ): Promise<void> {
    let pending: Buffer[] = [];
    await this.#send(request, signal, (chunk) => {
      let start = 0;
      for (let newline = chunk.indexOf(10); newline !== -1; newline = chunk.indexOf(10, start)) {
        pending.push(chunk.subarray(start, newline));
        const line = Buffer.concat(pending).toString('utf8');
        pending = [];
        start = newline + 1;
        if (line.trim() !== '') onLine(line);
      }
      if (start < chunk.length) pending.push(chunk.subarray(start));
    });
  }

  async #send(
    request: KubeGet,
    signal: AbortSignal,
    onChunk: (chunk: Buffer) => void,
    options: { readonly ifNoneMatch?: string | undefined; readonly isRetry?: boolean } = {},
  ): Promise<SentHead> {
    const aborted: SentHead = { status: 0, etag: undefined };
    const prepared = await this.#prepare(request);
    if (signal.aborted) return aborted;
    const { url, agent, headers, auth, send } = prepared;
    const ifNoneMatch = options.ifNoneMatch;
    return new Promise<SentHead>((resolve, reject) => {
      let responded = false;
      const outgoing = send(
        url,
        {
          method: 'GET',
          agent,
          headers: {
            ...headers,
            accept: request.accept ?? ACCEPT_JSON,
            'user-agent': USER_AGENT,
            ...(ifNoneMatch === undefined ? {} : { 'if-none-match': ifNoneMatch }),
          },
          ...(auth === undefined ? {} : { auth }),
          signal,
        },
        (response) => {
          responded = true;
          const etagHeader = response.headers.etag;
          const head: SentHead = { status: response.statusCode ?? 0, etag: etagHeader };
          // 304 only answers a conditional GET: to any other request it is a refusal.
          const notModified = response.statusCode === 304 && ifNoneMatch !== undefined;
          if (response.statusCode !== 200 && !notModified) {
            refusal(response, url.pathname).then((err) => {
              if (signal.aborted) resolve(aborted);
              else reject(err);
            }, reject);
            return;
          }
          response.on('data', (chunk: Buffer) => {
            try {
              onChunk(chunk);
            } catch (err: unknown) {
              outgoing.destroy();
              reject(err instanceof Error ? err : new Error(String(err)));
            }
          });
          response.once('error', () => undefined);
          response.once('close', () => {
            if (signal.aborted) resolve(aborted);
            else if (response.complete) resolve(head);
            else reject(new Error(`${url.pathname}: connection cut before the end of the body`));
          });
        },
      );
      outgoing.once('error', (err: NodeJS.ErrnoException) => {
        if (signal.aborted) {
          resolve(aborted);
          return;
        }
        // A kept-alive socket the server closed while it was idle, before any answer: the GET
        // went nowhere, so it goes once more, on a new connection if none other is free.
        const reset = err.code === 'ECONNRESET';
        if (options.isRetry !== true && !responded && outgoing.reusedSocket && reset) {
          this.#send(request, signal, onChunk, { ...options, isRetry: true }).then(resolve, reject);
          return;
        }
        reject(err);
      });
      outgoing.end();
    });
  }

  /** The URL, agent and credentials of one request, from the kubeconfig as of at most 1 s ago. */
  async #prepare(request: KubeGet) {
    const cluster = this.#kc.getCurrentCluster();
    if (!cluster) throw new Error('the kubeconfig has no current cluster');
    const options = await this.#credentials.options();
    const url = new URL(cluster.server.replace(/\/+$/, '') + request.path);
    for (const [key, value] of Object.entries(request.query ?? {})) {
      if (value !== undefined) url.searchParams.set(key, value);
    }
    const plain = url.protocol === 'http:';
    const proxied = cluster.proxyUrl !== undefined && cluster.proxyUrl !== '';
    const ownAgent = options.agent instanceof http.Agent ? options.agent : undefined;
    const headers: http.OutgoingHttpHeaders =
      options.headers === undefined || Array.isArray(options.headers)
        ? {}
        : (options.headers as http.OutgoingHttpHeaders);
    return {
      url,
      agent: proxied || plain ? ownAgent : this.#tlsAgent(options),
      headers,
      auth: options.auth,
      send: plain ? http.request : https.request,
    };
  }

  /** One TLS agent while the kubeconfig's TLS material stays the same (a rotation makes another). */
  #tlsAgent(options: Readonly<https.RequestOptions>): https.Agent {
    const material = tlsMaterial(options);
    // Compared field by field, never serialized: JSON.stringify calls a Buffer's toJSON before
    // any replacer sees it, so a CA of 1 KB became a thousand replacer calls on every request,
    // hot enough that V8 optimized them with TurboFan in an idle minute (README, "Idle footprint").
    if (this.#agent !== undefined && sameTlsMaterial(this.#agent.material, material)) {
      return this.#agent.agent;
    }
    // Kept-alive sockets: the periodic GETs (discovery, the Metrics API, the readiness probe's
    // list, every 30 s) reuse one connection instead of a TLS handshake each, which was most of
    // an idle collector's CPU between its timers (README, "Idle footprint"). A free socket is
    // closed after FREE_SOCKET_TIMEOUT_MS idle, before the API server's own idle timeout (90 s) and
    // the 60 s of common load balancers; one the server closed anyway is retried once (#send).
    // Every connection reuses the material's one TLS context (shared/tls-context.ts).
    const agent = new https.Agent({
      ...tlsAgentOptions(material),
      keepAlive: true,
      timeout: this.#freeSocketTimeoutMs,
    });
    this.#agent = { material, agent };
    return agent;
  }

  /**
   * The agent for these request options (a TLS material's one). The query and catalog client
   * (query/kube-rest.ts) sends over it too: one pool of connections to the API server for the
   * process, and after its first handshake every new connection resumes the TLS session.
   */
  agentFor(options: Readonly<https.RequestOptions>): https.Agent {
    return this.#tlsAgent(options);
  }

  /** Ends every connection of this client: never call it on a shared one (kubeHttpFor). */
  close(): void {
    this.#agent?.agent.destroy();
    this.#agent = undefined;
  }
}

/**
 * JSON.parse whose error never quotes the text: V8's message carries a snippet of the input,
 * and the input may be a Secret.
 */
export function parseJson(text: string, what: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new Error(`${what}: the API server sent a body that is not valid JSON`);
  }
}

/** A KubeRequestError with the Status message (a Status never carries an object's data). */
async function refusal(response: http.IncomingMessage, path: string): Promise<KubeRequestError> {
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
  let message = `${path} answered HTTP ${String(status)}`;
  let reason = '';
  let code = status;
  try {
    const parsed = JSON.parse(Buffer.concat(parts).toString('utf8')) as {
      kind?: unknown;
      message?: unknown;
      code?: unknown;
    };
    if (parsed.kind === 'Status' && typeof parsed.message === 'string') {
      reason = parsed.message.slice(0, 300);
      message = `${message}: ${reason}`;
    }
    if (typeof parsed.code === 'number' && parsed.code >= 400) code = parsed.code;
  } catch {
    // Not a Status: the code alone.
  }
  return new KubeRequestError(code, message, reason);
}

const sharedClients = new WeakMap<KubeConfig, KubeHttp>();

/**
 * The process's one client for a KubeConfig: every watch and periodic GET of the collector (state
 * and events discovery, the Metrics API, the readiness probe, owner lookups, the pod watches)
 * goes through one agent, so one pool of kept-alive connections and one TLS session cache. A
 * client each made its own connections and handshakes: a periodic GET of one found no free
 * connection of its own and opened a new one with a full handshake (two in an idle collector's
 * first minute, strace) while another client's connection idled.
 */
export function kubeHttpFor(kc: KubeConfig): KubeHttp {
  let client = sharedClients.get(kc);
  if (client === undefined) {
    client = new KubeHttp(kc);
    sharedClients.set(kc, client);
  }
  return client;
}
