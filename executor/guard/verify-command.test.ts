import { generateKeyPairSync } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { FakeClock } from '../../test/helpers/fake-clock.js';
import type { CommandClaims } from '../../shared/signed-command/claims.js';
import {
  base64url,
  generateCommandKeyPair,
  newCommandNonce,
  signCommand,
} from '../../shared/signed-command/sign-command.js';
import { createCommandGuard } from './authorize-command.js';
import {
  createCommandVerifier,
  loadCommandKeys,
  type CommandExpectation,
} from './verify-command.js';

const NOW_MS = Date.UTC(2026, 11, 1, 0, 0, 0);
const current = generateCommandKeyPair();
const next = generateCommandKeyPair();

const request: CommandExpectation = {
  requestId: 'req-1',
  permission: 'cluster:node_console',
  target: { kind: 'pod', namespace: 'team-a', name: 'api-0', container: 'app', resource: '' },
  verb: 'console',
};

function claimsFor(overrides: Partial<CommandClaims> = {}): CommandClaims {
  return {
    request_id: request.requestId,
    principal: 'alice@example.com',
    permission: 'cluster:node_console',
    target: request.target,
    verb: request.verb,
    iat: NOW_MS / 1000,
    exp: NOW_MS / 1000 + 60,
    nonce: newCommandNonce(),
    ...overrides,
  };
}

function setup(maxNonces?: number) {
  const clock = new FakeClock(NOW_MS);
  const verifier = createCommandVerifier({
    keys: loadCommandKeys([
      { id: 'k1', public_key: current.publicKeyPem },
      { id: 'k2', public_key: next.publicKeyPem },
    ]),
    clock,
    ...(maxNonces === undefined ? {} : { maxNonces }),
  });
  return { clock, verifier };
}

const sign = (claims: CommandClaims, keyId = 'k1', privateKey = current.privateKeyPem) =>
  signCommand(claims, { keyId, privateKey });

describe('signed command verification', () => {
  it('accepts a command signed by any configured key and returns the verified principal', () => {
    const { verifier } = setup();
    const first = verifier.verify(sign(claimsFor()), request);
    expect(first).toMatchObject({ ok: true, claims: { principal: 'alice@example.com' } });
    // Rotation: the second key verifies too.
    expect(verifier.verify(sign(claimsFor(), 'k2', next.privateKeyPem), request).ok).toBe(true);
  });

  it.each([
    ['no command at all', () => ''],
    ['garbage', () => 'not.a.jws'],
    ['an unknown key id', () => sign(claimsFor(), 'k9')],
    ['a key id whose key did not sign it', () => sign(claimsFor(), 'k2')],
    [
      'a key nobody configured',
      () => sign(claimsFor(), 'k1', generateCommandKeyPair().privateKeyPem),
    ],
    [
      'a changed payload',
      () => {
        const [header, , signature] = sign(claimsFor()).split('.');
        const widened = base64url(JSON.stringify({ ...claimsFor(), principal: 'root' }));
        return `${header ?? ''}.${widened}.${signature ?? ''}`;
      },
    ],
    [
      'alg none',
      () => {
        const [, payload] = sign(claimsFor()).split('.');
        const header = base64url(
          JSON.stringify({ alg: 'none', kid: 'k1', typ: 'kubexa-command+jws' }),
        );
        return `${header}.${payload ?? ''}.`;
      },
    ],
    [
      'an HMAC header with the public key as secret',
      () => {
        const [, payload, signature] = sign(claimsFor()).split('.');
        const header = base64url(
          JSON.stringify({ alg: 'HS256', kid: 'k1', typ: 'kubexa-command+jws' }),
        );
        return `${header}.${payload ?? ''}.${signature ?? ''}`;
      },
    ],
    ['a short nonce', () => sign(claimsFor({ nonce: 'abc' }))],
  ])('refuses %s as SIGNATURE_INVALID', (_name, make) => {
    const { verifier } = setup();
    expect(verifier.verify(make(), request)).toMatchObject({
      ok: false,
      code: 'SIGNATURE_INVALID',
    });
  });

  it('refuses expired, future and over-long commands as SIGNATURE_EXPIRED', () => {
    const { verifier, clock } = setup();
    const jws = sign(claimsFor());
    clock.advance(61_000);
    expect(verifier.verify(jws, request)).toMatchObject({ ok: false, code: 'SIGNATURE_EXPIRED' });
    const future = claimsFor({ iat: clock.now() / 1000 + 120, exp: clock.now() / 1000 + 180 });
    expect(verifier.verify(sign(future), request)).toMatchObject({ code: 'SIGNATURE_EXPIRED' });
    const long = claimsFor({ iat: clock.now() / 1000, exp: clock.now() / 1000 + 3600 });
    expect(verifier.verify(sign(long), request)).toMatchObject({ code: 'SIGNATURE_EXPIRED' });
  });

  it('refuses a replayed nonce, and forgets nonces once their command expired', () => {
    const { verifier, clock } = setup();
    const jws = sign(claimsFor());
    expect(verifier.verify(jws, request).ok).toBe(true);
    expect(verifier.verify(jws, request)).toMatchObject({ ok: false, code: 'SIGNATURE_REPLAYED' });
    expect(verifier.nonceCount()).toBe(1);
    clock.advance(61_000);
    verifier.verify(
      sign(claimsFor({ iat: clock.now() / 1000, exp: clock.now() / 1000 + 60 })),
      request,
    );
    // The first command's nonce is gone (it expired); the new one is remembered.
    expect(verifier.nonceCount()).toBe(1);
  });

  it('bounds the nonce cache: beyond it, LIMIT_REACHED, never unbounded growth', () => {
    const { verifier } = setup(3);
    for (let i = 0; i < 3; i++) expect(verifier.verify(sign(claimsFor()), request).ok).toBe(true);
    expect(verifier.verify(sign(claimsFor()), request)).toMatchObject({ code: 'LIMIT_REACHED' });
    expect(verifier.nonceCount()).toBe(3);
  });

  it.each([
    ['request id', { request_id: 'req-2' }],
    ['permission', { permission: 'cluster:node_write' as const }],
    ['verb', { verb: 'drain' }],
    ['target name', { target: { ...request.target, name: 'api-1' } }],
    ['target namespace', { target: { ...request.target, namespace: 'kube-system' } }],
    ['target container', { target: { ...request.target, container: 'sidecar' } }],
    ['target kind', { target: { ...request.target, kind: 'node' } }],
    ['target resource', { target: { ...request.target, resource: 'secrets' } }],
  ])('refuses a valid command for another %s as SIGNATURE_MISMATCH', (_field, overrides) => {
    const { verifier } = setup();
    expect(verifier.verify(sign(claimsFor(overrides)), request)).toMatchObject({
      ok: false,
      code: 'SIGNATURE_MISMATCH',
    });
  });

  describe('a console re-attach: bound to its session, not to a request id', () => {
    const attach: CommandExpectation = {
      ...request,
      requestId: '',
      verb: 'console_attach',
      sessionId: 'session-a',
    };
    const attachClaims = (overrides: Partial<CommandClaims> = {}) =>
      claimsFor({
        request_id: 'attach-call-7',
        verb: 'console_attach',
        session_id: 'session-a',
        ...overrides,
      });

    it('accepts a fresh signature naming the session, once', () => {
      const { verifier } = setup();
      const jws = sign(attachClaims());
      expect(verifier.verify(jws, attach).ok).toBe(true);
      expect(verifier.verify(jws, attach)).toMatchObject({ code: 'SIGNATURE_REPLAYED' });
    });

    it('refuses a signature for another session, or none, as SIGNATURE_MISMATCH', () => {
      const { verifier } = setup();
      expect(
        verifier.verify(sign(attachClaims({ session_id: 'session-b' })), attach),
      ).toMatchObject({
        code: 'SIGNATURE_MISMATCH',
        reason: 'the signed command names another session id',
      });
      const withoutSession = claimsFor({ request_id: 'attach-call-7', verb: 'console_attach' });
      expect(verifier.verify(sign(withoutSession), attach)).toMatchObject({
        code: 'SIGNATURE_MISMATCH',
      });
    });

    it('an open never accepts a signature that names a session', () => {
      const { verifier } = setup();
      expect(verifier.verify(sign(claimsFor({ session_id: 'session-a' })), request)).toMatchObject({
        code: 'SIGNATURE_MISMATCH',
      });
    });
  });

  it('refuses a configured key that is not Ed25519', () => {
    const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 });
    expect(() =>
      loadCommandKeys([
        { id: 'r', public_key: rsa.publicKey.export({ type: 'spki', format: 'pem' }).toString() },
      ]),
    ).toThrow(/security.command_keys\[0\].public_key: must be an Ed25519 key/);
  });
});

describe('command guard', () => {
  it('checks the signature before the gate, then the gate from its own configuration', () => {
    const { verifier } = setup();
    const guard = createCommandGuard(verifier, new Set(['nodeOps']));
    // Unsigned: refused for the signature, whatever the gates are.
    expect(guard.authorize('', request)).toMatchObject({ code: 'SIGNATURE_INVALID' });
    // Signed, but the pod console gate is off here.
    expect(guard.authorize(sign(claimsFor()), request)).toMatchObject({ code: 'GATE_DISABLED' });
    const drain: CommandExpectation = {
      requestId: 'req-9',
      permission: 'cluster:node_write',
      target: { kind: 'node', namespace: '', name: 'worker-1', container: '', resource: '' },
      verb: 'drain',
    };
    const drainClaims = claimsFor({
      request_id: 'req-9',
      permission: 'cluster:node_write',
      target: drain.target,
      verb: 'drain',
    });
    expect(guard.authorize(sign(drainClaims), drain)).toEqual({
      accepted: true,
      principal: 'alice@example.com',
      gate: 'nodeOps',
    });
  });

  it('refuses a verb that does not need the permission claimed as INVALID_REQUEST', () => {
    const { verifier } = setup();
    const guard = createCommandGuard(verifier, new Set(['podExec', 'nodeOps']));
    const wrong = { ...request, permission: 'cluster:node_write' };
    expect(
      guard.authorize(sign(claimsFor({ permission: 'cluster:node_write' })), wrong),
    ).toMatchObject({
      code: 'INVALID_REQUEST',
    });
  });
});
