// Signing a command for the executor: compact JWS, Ed25519, with node:crypto only. The platform
// does this; the demo gateway and the tests use the same function, so all three produce exactly
// what the executor's guard verifies (executor/guard/verify-command.ts).
import {
  createPrivateKey,
  generateKeyPairSync,
  randomBytes,
  sign,
  type KeyObject,
} from 'node:crypto';
import {
  COMMAND_JWS_ALG,
  COMMAND_JWS_TYPE,
  type CommandClaims,
  type CommandJwsHeader,
} from './claims.js';

export interface CommandSigningKey {
  /** The key id the executor looks the public key up by (security.command_keys[].id). */
  readonly keyId: string;
  /** Ed25519 private key: a KeyObject or PKCS#8 PEM. */
  readonly privateKey: KeyObject | string;
}

export function base64url(data: Buffer | string): string {
  return Buffer.from(data).toString('base64url');
}

/** Signs claims as a compact JWS the executor accepts. */
export function signCommand(claims: CommandClaims, key: CommandSigningKey): string {
  const privateKey =
    typeof key.privateKey === 'string' ? createPrivateKey(key.privateKey) : key.privateKey;
  if (privateKey.asymmetricKeyType !== 'ed25519') {
    throw new Error(
      `a command signing key must be Ed25519, not ${String(privateKey.asymmetricKeyType)}`,
    );
  }
  const header: CommandJwsHeader = { alg: COMMAND_JWS_ALG, kid: key.keyId, typ: COMMAND_JWS_TYPE };
  const signingInput = `${base64url(JSON.stringify(header))}.${base64url(JSON.stringify(claims))}`;
  const signature = sign(null, Buffer.from(signingInput), privateKey);
  return `${signingInput}.${base64url(signature)}`;
}

/** A fresh nonce: 128 random bits, base64url. */
export function newCommandNonce(): string {
  return randomBytes(16).toString('base64url');
}

export interface CommandKeyPair {
  /** SPKI PEM: what goes into security.command_keys[].public_key. */
  readonly publicKeyPem: string;
  /** PKCS#8 PEM: stays with the signer. */
  readonly privateKeyPem: string;
}

/** A new Ed25519 key pair for signing commands (the demo gateway, tests). */
export function generateCommandKeyPair(): CommandKeyPair {
  const { publicKey, privateKey } = generateKeyPairSync('ed25519');
  return {
    publicKeyPem: publicKey.export({ type: 'spki', format: 'pem' }).toString(),
    privateKeyPem: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
  };
}
