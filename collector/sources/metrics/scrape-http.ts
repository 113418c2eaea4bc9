// One HTTP GET of a Prometheus (or pprof) endpoint, with the limits a scraper owes the cluster
// and itself: a timeout, a cap on the body (counted after gzip is undone), no redirects
// (a redirect is reported, never followed: it could lead the collector's network identity
// anywhere), TLS 1.2 or newer with an optional CA file, and a bearer token read from its file at
// every scrape so a rotated token is picked up without a restart.
import { readFile } from 'node:fs/promises';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { createGunzip } from 'node:zlib';
import type { ScrapeStatus } from './self-metrics.js';

export interface HttpTarget {
  readonly url: string;
  readonly accept: string;
  readonly timeoutMs: number;
  readonly maxBodyBytes: number;
  /** PEM bundle to verify the server with (https); empty: the system's roots. */
  readonly caFile?: string;
  /** File holding a bearer token; empty: no Authorization header. */
  readonly bearerTokenFile?: string;
  readonly userAgent: string;
}

export interface HttpResult {
  readonly body: Buffer;
  readonly contentType: string | undefined;
}

/** A failed scrape, with the status it is counted under and a message naming the cause. */
export class ScrapeError extends Error {
  readonly status: Exclude<ScrapeStatus, 'success'>;
  constructor(status: Exclude<ScrapeStatus, 'success'>, message: string) {
    super(message);
    this.name = 'ScrapeError';
    this.status = status;
  }
}

/** The URL as logs and events show it: credentials in it replaced by "xxxxx". */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.username !== '' || parsed.password !== '') {
      parsed.username = parsed.username === '' ? '' : 'xxxxx';
      parsed.password = parsed.password === '' ? '' : 'xxxxx';
    }
    return parsed.toString();
  } catch {
    return '(unparsable URL)';
  }
}

export async function httpGet(target: HttpTarget, signal: AbortSignal): Promise<HttpResult> {
  const url = new URL(target.url);
  const headers: Record<string, string> = {
    Accept: target.accept,
    'Accept-Encoding': 'gzip',
    'User-Agent': target.userAgent,
  };
  if (target.bearerTokenFile !== undefined && target.bearerTokenFile !== '') {
    const token = (await readFile(target.bearerTokenFile, 'utf8')).trim();
    headers['Authorization'] = `Bearer ${token}`;
  }
  if (url.username !== '' || url.password !== '') {
    const basic = `${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`;
    headers['Authorization'] ??= `Basic ${Buffer.from(basic).toString('base64')}`;
  }
  const ca =
    target.caFile !== undefined && target.caFile !== '' ? await readFile(target.caFile) : undefined;
  const timeout = AbortSignal.timeout(target.timeoutMs);
  const combined = AbortSignal.any([signal, timeout]);
  try {
    return await new Promise<HttpResult>((resolve, reject) => {
      const options = {
        method: 'GET',
        headers,
        signal: combined,
        ...(url.protocol === 'https:'
          ? { minVersion: 'TLSv1.2' as const, ...(ca ? { ca } : {}) }
          : {}),
      };
      const request = (url.protocol === 'https:' ? httpsRequest : httpRequest)(
        url,
        options,
        (response) => {
          readResponse(response, target).then(resolve, reject);
        },
      );
      request.on('error', reject);
      request.end();
    });
  } catch (err: unknown) {
    if (err instanceof ScrapeError) throw err;
    if (timeout.aborted && !signal.aborted) {
      throw new ScrapeError('timeout', `no complete answer within ${String(target.timeoutMs)} ms`);
    }
    throw new ScrapeError('error', connectionFailure(err));
  }
}

/**
 * The reason of a failed connection. A handshake that found no common TLS version is named as
 * such (OpenSSL's words: the server alerts protocol_version to our TLS 1.2+ hello, or answers
 * with a version below our floor), so the log says why a TLS 1.0/1.1 endpoint is refused.
 */
function connectionFailure(err: unknown): string {
  const text = errorText(err);
  return err instanceof Error && /protocol version|unsupported protocol/i.test(err.message)
    ? `TLS handshake refused: the endpoint offers no TLS 1.2 or newer (${text})`
    : text;
}

function errorText(err: unknown): string {
  if (err instanceof Error) {
    const code = (err as NodeJS.ErrnoException).code;
    return code !== undefined && !err.message.includes(code)
      ? `${code}: ${err.message}`
      : err.message;
  }
  return String(err);
}

async function readResponse(response: IncomingMessage, target: HttpTarget): Promise<HttpResult> {
  const status = response.statusCode ?? 0;
  if (status < 200 || status >= 300) {
    response.resume();
    throw statusError(status, response.headers.location);
  }
  const declared = Number(response.headers['content-length'] ?? Number.NaN);
  if (Number.isFinite(declared) && declared > target.maxBodyBytes) {
    response.destroy();
    throw tooLarge(target.maxBodyBytes);
  }
  const gzipped = /\bgzip\b/i.test(response.headers['content-encoding'] ?? '');
  const stream = gzipped ? response.pipe(createGunzip()) : response;
  const chunks: Buffer[] = [];
  let total = 0;
  try {
    for await (const chunk of stream as AsyncIterable<Buffer>) {
      total += chunk.length;
      if (total > target.maxBodyBytes) {
        response.destroy();
        throw tooLarge(target.maxBodyBytes);
      }
      chunks.push(chunk);
    }
  } finally {
    if (gzipped) stream.destroy();
  }
  return { body: Buffer.concat(chunks, total), contentType: response.headers['content-type'] };
}

function tooLarge(cap: number): ScrapeError {
  return new ScrapeError('too_large', `body larger than the ${String(cap)}-byte cap`);
}

function statusError(status: number, location: string | undefined): ScrapeError {
  if (status >= 300 && status < 400) {
    return new ScrapeError(
      'redirect',
      `HTTP ${String(status)} redirect${location === undefined ? '' : ` to ${redactUrl(location)}`} (redirects are not followed: configure the final URL)`,
    );
  }
  if (status >= 500) return new ScrapeError('server_error', `HTTP ${String(status)}`);
  return new ScrapeError('client_error', `HTTP ${String(status)}`);
}
