// grpc-js reports every failed dial as a bare "could not connect": a TLS agent facing a
// plaintext gateway, an untrusted certificate and a closed port all read the same. After a dial
// fails, one plain TLS handshake to the same address tells them apart, so the log line can name
// the setting to check.
import { readFile } from 'node:fs/promises';
import { isIP } from 'node:net';
import { connect, type ConnectionOptions } from 'node:tls';
import type { DialOptions } from './dial.js';

/** The server there is not speaking TLS: OpenSSL read plaintext where a record should be. */
const NOT_TLS_CODES = new Set([
  'ERR_SSL_WRONG_VERSION_NUMBER',
  'ERR_SSL_PACKET_LENGTH_TOO_LONG',
  'ERR_SSL_HTTP_REQUEST',
  'ERR_SSL_RECORD_LAYER_FAILURE',
]);
/** The certificate chain does not lead to a CA we trust. */
const UNTRUSTED_CODES = new Set([
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'CERT_UNTRUSTED',
  'CERT_SIGNATURE_FAILURE',
]);
const DATE_CODES = new Set(['CERT_HAS_EXPIRED', 'CERT_NOT_YET_VALID']);
const DNS_CODES = new Set(['ENOTFOUND', 'EAI_AGAIN']);

type ProbeResult =
  | { readonly kind: 'handshake'; readonly alpn: string | false }
  | { readonly kind: 'error'; readonly code: string; readonly message: string }
  | { readonly kind: 'timeout' };

/** host and port of `host:port` or `[v6]:port`; undefined when there is no port. */
export function splitHostPort(address: string): { host: string; port: number } | undefined {
  const match = /^\[([^\]]+)\]:(\d+)$/.exec(address) ?? /^([^:]+):(\d+)$/.exec(address);
  if (!match?.[1] || !match[2]) return undefined;
  const port = Number(match[2]);
  return port > 0 && port < 65536 ? { host: match[1], port } : undefined;
}

/**
 * Why a dial to the gateway failed, in terms of the settings to check; undefined when a TLS
 * probe finds nothing to blame (the cause lies beyond the handshake). Never throws.
 */
export async function explainDialFailure(
  options: DialOptions,
  timeoutMs: number,
  signal: AbortSignal,
): Promise<string | undefined> {
  const target = splitHostPort(options.address);
  if (!target) return undefined;
  const verify = options.tls && options.insecureSkipVerify !== true;
  const ca = options.tls ? await readCa(options.caCertPath) : undefined;
  const result = await probe(
    {
      host: target.host,
      port: target.port,
      ...(isIP(target.host) === 0 ? { servername: target.host } : {}),
      ...(ca ? { ca } : {}),
      rejectUnauthorized: verify,
      ALPNProtocols: ['h2'],
    },
    timeoutMs,
    signal,
  );
  return options.tls
    ? explainTlsResult(options, target.host, result)
    : explainPlaintextResult(options.address, target.host, result);
}

function explainTlsResult(
  options: DialOptions,
  host: string,
  result: ProbeResult,
): string | undefined {
  const { address } = options;
  const failed = `the TLS handshake with ${address} failed`;
  if (result.kind === 'timeout') {
    return `${failed}: no answer to it; check gateway.tls and the port in gateway.address`;
  }
  if (result.kind === 'handshake') {
    if (result.alpn === 'h2') return undefined;
    return `${address} completes a TLS handshake but offers no HTTP/2 (ALPN ${result.alpn || 'none'}): check that gateway.address is the gateway's gRPC port`;
  }
  const { code, message } = result;
  const connection = explainConnectionError(address, host, code);
  if (connection) return connection;
  if (NOT_TLS_CODES.has(code)) {
    return `${failed} (${code}): the server there does not speak TLS. Check gateway.tls (false only for a plaintext development gateway), that the port in gateway.address is the gateway's TLS port, and that no plaintext proxy sits in between`;
  }
  if (code === 'ECONNRESET') {
    return `${failed}: the server closed the connection during the handshake (it may not speak TLS). Check gateway.tls and the port in gateway.address`;
  }
  return (
    explainCertificateError(options, host, result) ??
    `${failed} (${code}: ${message}); check gateway.tls, the port in gateway.address and gateway.ca_cert_path`
  );
}

function explainCertificateError(
  options: DialOptions,
  host: string,
  { code, message }: { code: string; message: string },
): string | undefined {
  const failed = `the TLS handshake with ${options.address} failed`;
  if (UNTRUSTED_CODES.has(code)) {
    const roots =
      options.caCertPath === undefined || options.caCertPath === ''
        ? 'the system roots are in use'
        : `now ${options.caCertPath}`;
    return `${failed}: the gateway's certificate is not trusted (${code}). Set gateway.ca_cert_path to the CA bundle that signed it (${roots})`;
  }
  if (DATE_CODES.has(code)) {
    return `${failed}: the gateway's certificate is outside its validity dates (${code}); renew it, or check this node's clock`;
  }
  if (code === 'ERR_TLS_CERT_ALTNAME_INVALID') {
    return `${failed}: the gateway's certificate does not name ${host} (${message}); check the host in gateway.address`;
  }
  return undefined;
}

function explainPlaintextResult(
  address: string,
  host: string,
  result: ProbeResult,
): string | undefined {
  if (result.kind === 'handshake') {
    return `${address} speaks TLS but gateway.tls is false: set gateway.tls: true (and gateway.ca_cert_path if its CA is private)`;
  }
  if (result.kind === 'error') return explainConnectionError(address, host, result.code);
  return undefined;
}

function explainConnectionError(address: string, host: string, code: string): string | undefined {
  if (code === 'ECONNREFUSED') {
    return `connection refused by ${address}: nothing listens there; check the host and port in gateway.address`;
  }
  if (DNS_CODES.has(code)) return `cannot resolve ${host} (${code}): check gateway.address`;
  return undefined;
}

/** One TLS handshake, then the socket is closed. */
function probe(
  options: ConnectionOptions,
  timeoutMs: number,
  signal: AbortSignal,
): Promise<ProbeResult> {
  return new Promise<ProbeResult>((resolve) => {
    const socket = connect(options);
    const finish = (result: ProbeResult): void => {
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
      socket.destroy();
      resolve(result);
    };
    const onAbort = (): void => {
      finish({ kind: 'timeout' });
    };
    const timer = setTimeout(onAbort, timeoutMs);
    timer.unref();
    signal.addEventListener('abort', onAbort, { once: true });
    socket.once('secureConnect', () => {
      finish({ kind: 'handshake', alpn: socket.alpnProtocol ?? false });
    });
    socket.once('error', (err: NodeJS.ErrnoException) => {
      finish({ kind: 'error', code: err.code ?? 'unknown', message: err.message });
    });
  });
}

/** The CA bundle, or the system roots when none is set or it cannot be read (dial says why). */
async function readCa(path: string | undefined): Promise<Buffer | undefined> {
  if (path === undefined || path === '') return undefined;
  try {
    return await readFile(path);
  } catch {
    return undefined;
  }
}
