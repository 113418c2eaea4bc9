// A small raw HTTP client for the API server, used by node jobs and mutations: they need the
// API server's own status code and Status body (429 from a PodDisruptionBudget, 403 from RBAC,
// 409 from a conflict), exact content types for each patch kind, and dryRun on every write.
// client-node's typed API hides most of that, and 1.x builds a new TLS agent per call; this
// keeps one keep-alive agent per client and still takes credentials from the KubeConfig on every
// request (an in-cluster token is re-read as client-node does).
import { Agent as HttpsAgent, request as httpsRequest, type RequestOptions } from 'node:https';
import { Agent as HttpAgent, request as httpRequest } from 'node:http';
import type { KubeConfig } from '@kubernetes/client-node';

/** The API server's answer: status code, the body parsed as JSON when it is JSON, and its text. */
export interface KubeResponse {
  readonly status: number;
  readonly body: unknown;
  readonly text: string;
}

export interface KubeRequest {
  readonly method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  /** Absolute API path, e.g. /api/v1/nodes/n1. */
  readonly path: string;
  readonly query?: Readonly<Record<string, string | undefined>>;
  readonly body?: string;
  /** Content-Type of the body; application/json when absent. */
  readonly contentType?: string;
  readonly signal?: AbortSignal;
}

export interface KubeHttp {
  request(request: KubeRequest): Promise<KubeResponse>;
  close(): void;
}

/** One request may take this long before it is abandoned (a wedged API server). */
const REQUEST_TIMEOUT_MS = 30_000;
/** Bodies larger than this are cut off: nothing the executor reads is anywhere near it. */
const MAX_RESPONSE_BYTES = 32 * 1024 * 1024;

export function createKubeHttp(kc: KubeConfig): KubeHttp {
  const cluster = kc.getCurrentCluster();
  if (cluster === null) throw new Error('the kubeconfig has no current cluster');
  const base = new URL(cluster.server);
  const secure = base.protocol === 'https:';
  let agent: HttpsAgent | HttpAgent | undefined;

  async function options(): Promise<RequestOptions> {
    const opts: RequestOptions = {};
    await kc.applyToHTTPSOptions(opts);
    if (agent === undefined) {
      const { ca, cert, key, pfx, passphrase, rejectUnauthorized, servername } = opts;
      agent = secure
        ? new HttpsAgent({
            keepAlive: true,
            maxSockets: 16,
            ...(ca === undefined ? {} : { ca }),
            ...(cert === undefined ? {} : { cert }),
            ...(key === undefined ? {} : { key }),
            ...(pfx === undefined ? {} : { pfx }),
            ...(passphrase === undefined ? {} : { passphrase }),
            ...(rejectUnauthorized === undefined ? {} : { rejectUnauthorized }),
            ...(servername === undefined ? {} : { servername }),
          })
        : new HttpAgent({ keepAlive: true, maxSockets: 16 });
    }
    return { headers: opts.headers ?? {}, agent };
  }

  return {
    async request(req) {
      const url = new URL(base.toString());
      url.pathname = `${base.pathname.replace(/\/$/, '')}${req.path}`;
      for (const [name, value] of Object.entries(req.query ?? {})) {
        if (value !== undefined) url.searchParams.set(name, value);
      }
      const opts = await options();
      const headers: Record<string, string | number | string[]> = {
        ...(opts.headers as Record<string, string>),
        accept: 'application/json',
      };
      if (req.body !== undefined) {
        headers['content-type'] = req.contentType ?? 'application/json';
        headers['content-length'] = Buffer.byteLength(req.body);
      }
      const send = secure ? httpsRequest : httpRequest;
      return new Promise<KubeResponse>((resolve, reject) => {
        const call = send(url, {
          method: req.method,
          headers,
          agent: opts.agent,
          timeout: REQUEST_TIMEOUT_MS,
          ...(req.signal === undefined ? {} : { signal: req.signal }),
        });
        call.on('timeout', () => {
          call.destroy(
            new Error(
              `the API server did not answer ${req.method} ${req.path} within ${REQUEST_TIMEOUT_MS} ms`,
            ),
          );
        });
        call.on('error', reject);
        call.on('response', (response) => {
          const chunks: Buffer[] = [];
          let size = 0;
          response.on('data', (chunk: Buffer) => {
            size += chunk.length;
            if (size > MAX_RESPONSE_BYTES) {
              response.destroy(
                new Error(`the API server's answer exceeds ${MAX_RESPONSE_BYTES} bytes`),
              );
              return;
            }
            chunks.push(chunk);
          });
          response.on('error', reject);
          response.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            resolve({ status: response.statusCode ?? 0, body: parseJson(text), text });
          });
        });
        call.end(req.body);
      });
    },
    close() {
      agent?.destroy();
    },
  };
}

/** The fields of a metav1.Status the executor reports. */
export interface KubeStatus {
  readonly status: string;
  readonly reason: string;
  readonly message: string;
  readonly causes: readonly { readonly type: string; readonly message: string }[];
}

/** Reads a metav1.Status out of an answer (empty strings where the body has none). */
export function statusOf(response: KubeResponse): KubeStatus {
  const body = isRecord(response.body) ? response.body : {};
  const details = isRecord(body['details']) ? body['details'] : {};
  const causes = Array.isArray(details['causes']) ? details['causes'] : [];
  return {
    status: typeof body['status'] === 'string' && body['kind'] === 'Status' ? body['status'] : '',
    reason: typeof body['reason'] === 'string' ? body['reason'] : '',
    message:
      typeof body['message'] === 'string'
        ? body['message']
        : response.status >= 400
          ? response.text.slice(0, 512)
          : '',
    causes: causes.filter(isRecord).map((cause) => ({
      type: typeof cause['type'] === 'string' ? cause['type'] : '',
      message: typeof cause['message'] === 'string' ? cause['message'] : '',
    })),
  };
}

/** The body as JSON, or undefined when it is empty or not JSON. */
function parseJson(text: string): unknown {
  if (text === '') return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
