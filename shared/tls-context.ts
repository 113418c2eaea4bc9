// One TLS SecureContext per kubeconfig TLS material, shared by every connection to the API
// server. An https.Agent given `ca`, `cert` and `key` hands them to tls.connect, which builds a
// new SecureContext for every connection (Node's `options.secureContext ||
// tls.createSecureContext(options)`): with OpenSSL 3 that is about 0.8 ms of CPU and 60 KiB held
// per connection (measured with the test CA: 200 contexts, Node 20), and every follow stream of
// the collector's pod log source is a connection of its own. The context here is built once per
// material and passed as `secureContext`; new material (a rotated client certificate or CA file)
// gets a new context, and the connections already open keep theirs. A rotated token is a header,
// not TLS material: it never needs a new context. Both processes use it: the collector's API
// clients and the executor's token liveness probe (executor/identity/token-liveness.ts), each
// with its own cache (module state, one per process).
import { createHash } from 'node:crypto';
import type https from 'node:https';
import tls from 'node:tls';

/** The TLS part of the kubeconfig's request options (applyToHTTPSOptions). */
export interface TlsMaterial {
  readonly ca: https.AgentOptions['ca'];
  readonly cert: https.AgentOptions['cert'];
  readonly key: https.AgentOptions['key'];
  readonly rejectUnauthorized: boolean | undefined;
  readonly servername: string | undefined;
}

/** Contexts kept: the current material and a few recent ones (clients move over within 1 s). */
const MAX_CONTEXTS = 4;
/** By a digest of ca, cert and key; the oldest is dropped first. Module state: a pure cache. */
const contexts = new Map<string, tls.SecureContext>();

/** The TLS material of these request options. */
export function tlsMaterial(options: Readonly<https.RequestOptions>): TlsMaterial {
  return {
    ca: options.ca,
    cert: options.cert,
    key: options.key,
    rejectUnauthorized: options.rejectUnauthorized,
    servername: options.servername,
  };
}

const sameBytes = (a: unknown, b: unknown): boolean =>
  Buffer.isBuffer(a) && Buffer.isBuffer(b) ? a.equals(b) : a === b;

/**
 * The same TLS material: an agent built for `a` serves `b`. A change (a rotated CA or client
 * certificate, another server name or verification setting) needs a new agent: an agent keeps
 * the options it was built with for every connection it opens later.
 */
export function sameTlsMaterial(a: TlsMaterial, b: TlsMaterial): boolean {
  return (
    sameBytes(a.ca, b.ca) &&
    sameBytes(a.cert, b.cert) &&
    sameBytes(a.key, b.key) &&
    a.rejectUnauthorized === b.rejectUnauthorized &&
    a.servername === b.servername
  );
}

function digestOf(material: TlsMaterial): string {
  const hash = createHash('sha256');
  for (const part of [material.ca, material.cert, material.key]) {
    const items: readonly unknown[] = Array.isArray(part) ? part : [part];
    hash.update(`${String(items.length)}:`);
    for (const item of items) {
      if (Buffer.isBuffer(item) || typeof item === 'string') {
        hash.update(`${String(item.length)}:`);
        hash.update(item);
      } else {
        // A KeyObject-like entry ({ pem, passphrase }) or nothing: its JSON form.
        hash.update(`j${JSON.stringify({ item })}`);
      }
    }
  }
  return hash.digest('base64');
}

/** The shared SecureContext of this material; built on first use. */
export function secureContextFor(material: TlsMaterial): tls.SecureContext {
  const key = digestOf(material);
  const known = contexts.get(key);
  if (known !== undefined) {
    // Most recently used last.
    contexts.delete(key);
    contexts.set(key, known);
    return known;
  }
  const context = tls.createSecureContext({
    ...(material.ca === undefined ? {} : { ca: material.ca }),
    ...(material.cert === undefined ? {} : { cert: material.cert }),
    ...(material.key === undefined ? {} : { key: material.key }),
  });
  contexts.set(key, context);
  for (const oldest of contexts.keys()) {
    if (contexts.size <= MAX_CONTEXTS) break;
    contexts.delete(oldest);
  }
  return context;
}

/**
 * https.AgentOptions for this material: what the kubeconfig sets, and the shared context. The
 * ca, cert and key stay in the options: the agent names its socket pool and TLS session cache
 * after them, so new material never reuses a socket or a session of the old.
 */
export function tlsAgentOptions(material: TlsMaterial): https.AgentOptions {
  const defined = Object.fromEntries(
    Object.entries(material).filter(([, value]) => value !== undefined),
  ) as https.AgentOptions;
  return { ...defined, secureContext: secureContextFor(material) };
}
