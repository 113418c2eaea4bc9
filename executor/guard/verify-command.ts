// Verifies the platform's signed command (compact JWS, Ed25519) against the public keys in the
// executor's OWN configuration, and that it is the command for THIS request: same request id,
// permission, target and verb, within its lifetime, never seen before. Nothing the collector says
// is trusted: a compromised collector can relay a signed command, not invent or reuse one.
import { createPublicKey, KeyObject, verify } from 'node:crypto';
import type { Clock } from '../../shared/clock.js';
import {
  COMMAND_CLOCK_SKEW_SEC,
  COMMAND_JWS_ALG,
  COMMAND_JWS_TYPE,
  COMMAND_PERMISSIONS,
  MAX_COMMAND_LIFETIME_SEC,
  MIN_NONCE_LENGTH,
  type CommandClaims,
  type CommandPermission,
  type CommandTargetClaim,
} from '../../shared/signed-command/claims.js';

/** Refusal codes the verifier produces (names as in executor.v1 RefusalCode, without prefix). */
export type CommandRefusalCode =
  | 'SIGNATURE_INVALID'
  | 'SIGNATURE_EXPIRED'
  | 'SIGNATURE_REPLAYED'
  | 'SIGNATURE_MISMATCH'
  | 'LIMIT_REACHED';

export type CommandVerdict =
  | { readonly ok: true; readonly claims: CommandClaims }
  | { readonly ok: false; readonly code: CommandRefusalCode; readonly reason: string };

/** What the request the command came with asks for; the claims must say exactly this. */
export interface CommandExpectation {
  readonly requestId: string;
  readonly permission: string;
  readonly target: CommandTargetClaim;
  readonly verb: string;
  /**
   * Set for a console re-attach: the claims must name this session (claim session_id), which is
   * then what the command is bound to. The attach's request id names the gateway's call, which
   * the executor never sees, so it is not compared. Unset (every other request): the request id
   * must match and the claims must name no session, so an attach's signature never opens.
   */
  readonly sessionId?: string;
}

export interface CommandKeyConfig {
  readonly id: string;
  readonly public_key: string;
}

/** A JWS larger than this is refused before it is parsed. */
const MAX_JWS_LENGTH = 8 * 1024;
/** Nonces remembered at once; a flood beyond it is refused, never an unbounded map. */
const DEFAULT_MAX_NONCES = 100_000;

/** Loads the configured keys; a key that is not Ed25519 is a configuration error. */
export function loadCommandKeys(keys: readonly CommandKeyConfig[]): ReadonlyMap<string, KeyObject> {
  const out = new Map<string, KeyObject>();
  keys.forEach((key, index) => {
    const publicKey = createPublicKey(key.public_key);
    if (publicKey.asymmetricKeyType !== 'ed25519') {
      throw new Error(
        `security.command_keys[${index}].public_key: must be an Ed25519 key, not ${String(publicKey.asymmetricKeyType)}`,
      );
    }
    out.set(key.id, publicKey);
  });
  return out;
}

export interface CommandVerifierOptions {
  readonly keys: ReadonlyMap<string, KeyObject>;
  readonly clock: Pick<Clock, 'now'>;
  readonly maxNonces?: number;
}

export interface CommandVerifier {
  /** Verifies, and on success records the nonce: a command is good for one request. */
  verify(jws: string, expected: CommandExpectation): CommandVerdict;
  /** Nonces remembered now (for tests and metrics). */
  nonceCount(): number;
}

const refuse = (code: CommandRefusalCode, reason: string): CommandVerdict => ({
  ok: false,
  code,
  reason,
});

export function createCommandVerifier(options: CommandVerifierOptions): CommandVerifier {
  const maxNonces = options.maxNonces ?? DEFAULT_MAX_NONCES;
  /** nonce -> its command's expiry (ms). Forgotten once expired: an expired command is refused anyway. */
  const seen = new Map<string, number>();

  const forgetExpired = (nowMs: number) => {
    for (const [nonce, expiresMs] of seen) if (expiresMs <= nowMs) seen.delete(nonce);
  };

  return {
    nonceCount: () => seen.size,
    verify(jws, expected) {
      const signed = verifySignature(jws, options.keys);
      if (!('request_id' in signed)) return signed;
      const claims = signed;
      const nowMs = options.clock.now();
      const timing = checkLifetime(claims, nowMs / 1000);
      if (timing !== undefined) return timing;
      const mismatch = firstMismatch(claims, expected);
      if (mismatch !== undefined) {
        return refuse('SIGNATURE_MISMATCH', `the signed command names another ${mismatch}`);
      }
      forgetExpired(nowMs);
      if (seen.has(claims.nonce)) {
        return refuse('SIGNATURE_REPLAYED', 'the command was already used');
      }
      if (seen.size >= maxNonces) {
        return refuse('LIMIT_REACHED', 'too many unexpired commands; try again shortly');
      }
      seen.set(claims.nonce, claims.exp * 1000);
      return { ok: true, claims };
    },
  };
}

/** The claims of a well-formed JWS signed by a configured key, or the refusal. */
function verifySignature(
  jws: string,
  keys: ReadonlyMap<string, KeyObject>,
): CommandClaims | CommandVerdict {
  if (jws === '') return refuse('SIGNATURE_INVALID', 'the request carries no signed command');
  if (jws.length > MAX_JWS_LENGTH) {
    return refuse('SIGNATURE_INVALID', `the signed command exceeds ${MAX_JWS_LENGTH} bytes`);
  }
  const parts = jws.split('.');
  if (parts.length !== 3) return refuse('SIGNATURE_INVALID', 'not a compact JWS');
  const [headerPart = '', payloadPart = '', signaturePart = ''] = parts;
  const key = signingKey(decodeJson(headerPart), keys);
  if (!(key instanceof KeyObject)) return key;
  const signature = Buffer.from(signaturePart, 'base64url');
  if (!verify(null, Buffer.from(`${headerPart}.${payloadPart}`), key, signature)) {
    return refuse('SIGNATURE_INVALID', 'the signature does not verify');
  }
  const claims = parseClaims(decodeJson(payloadPart));
  return typeof claims === 'string' ? refuse('SIGNATURE_INVALID', claims) : claims;
}

/** The configured key the JWS header selects, or the refusal. */
function signingKey(
  header: unknown,
  keys: ReadonlyMap<string, KeyObject>,
): KeyObject | CommandVerdict {
  if (!isRecord(header)) return refuse('SIGNATURE_INVALID', 'the JWS header is not JSON');
  if (header['alg'] !== COMMAND_JWS_ALG) {
    return refuse('SIGNATURE_INVALID', `alg must be ${COMMAND_JWS_ALG}`);
  }
  if (header['typ'] !== COMMAND_JWS_TYPE) {
    return refuse('SIGNATURE_INVALID', `typ must be ${COMMAND_JWS_TYPE}`);
  }
  const kid = header['kid'];
  const key = typeof kid === 'string' ? keys.get(kid) : undefined;
  return key ?? refuse('SIGNATURE_INVALID', 'the signing key id is not in security.command_keys');
}

function checkLifetime(claims: CommandClaims, nowSec: number): CommandVerdict | undefined {
  if (claims.iat > nowSec + COMMAND_CLOCK_SKEW_SEC) {
    return refuse('SIGNATURE_EXPIRED', 'the command is issued in the future');
  }
  if (claims.exp <= nowSec) return refuse('SIGNATURE_EXPIRED', 'the command has expired');
  if (claims.exp - claims.iat > MAX_COMMAND_LIFETIME_SEC) {
    return refuse(
      'SIGNATURE_EXPIRED',
      `the command claims a lifetime above ${MAX_COMMAND_LIFETIME_SEC} s`,
    );
  }
  return undefined;
}

function decodeJson(part: string): unknown {
  try {
    return JSON.parse(Buffer.from(part, 'base64url').toString('utf8')) as unknown;
  } catch {
    return undefined;
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

const isString = (value: unknown): value is string => typeof value === 'string';

const nonEmpty = (value: unknown): value is string => isString(value) && value !== '';

/** The first problem with the claims' scalar fields, as a sentence; undefined when none. */
function scalarProblem(payload: Record<string, unknown>): string | undefined {
  const { request_id, principal, permission, verb, iat, exp, nonce } = payload;
  const problems: [boolean, string][] = [
    [!nonEmpty(request_id), 'request_id is missing'],
    [!nonEmpty(principal), 'principal is missing'],
    [
      !isString(permission) || !(COMMAND_PERMISSIONS as readonly string[]).includes(permission),
      `permission must be one of ${COMMAND_PERMISSIONS.join(', ')}`,
    ],
    [!nonEmpty(verb), 'verb is missing'],
    [
      typeof iat !== 'number' || typeof exp !== 'number' || !Number.isFinite(iat + exp),
      'iat and exp must be numbers (seconds since the epoch)',
    ],
    [
      !isString(nonce) || nonce.length < MIN_NONCE_LENGTH,
      `nonce must be a string of at least ${MIN_NONCE_LENGTH} characters`,
    ],
    [!isRecord(payload['target']), 'target is missing'],
  ];
  return problems.find(([bad]) => bad)?.[1];
}

/** The claims, or a sentence saying what is wrong with them. */
function parseClaims(payload: unknown): CommandClaims | string {
  if (!isRecord(payload)) return 'the JWS payload is not a JSON object';
  const problem = scalarProblem(payload);
  if (problem !== undefined) return problem;
  const target = payload['target'] as Record<string, unknown>;
  const field = (name: string) => (isString(target[name]) ? target[name] : '');
  return {
    request_id: payload['request_id'] as string,
    principal: payload['principal'] as string,
    permission: payload['permission'] as CommandPermission,
    target: {
      kind: field('kind'),
      namespace: field('namespace'),
      name: field('name'),
      container: field('container'),
      resource: field('resource'),
    },
    verb: payload['verb'] as string,
    iat: payload['iat'] as number,
    exp: payload['exp'] as number,
    nonce: payload['nonce'] as string,
    session_id: isString(payload['session_id']) ? payload['session_id'] : '',
  };
}

function firstMismatch(claims: CommandClaims, expected: CommandExpectation): string | undefined {
  if (expected.sessionId === undefined) {
    if (claims.request_id !== expected.requestId) return 'request id';
    if ((claims.session_id ?? '') !== '') return 'session id (an attach is not an open)';
  } else if (claims.session_id !== expected.sessionId) {
    return 'session id';
  }
  if (claims.permission !== expected.permission) return 'permission';
  if (claims.verb !== expected.verb) return 'verb';
  for (const key of ['kind', 'namespace', 'name', 'container', 'resource'] as const) {
    if (claims.target[key] !== expected.target[key]) return `target ${key}`;
  }
  return undefined;
}
