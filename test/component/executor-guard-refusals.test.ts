// Every refusal the executor's guard makes, sent straight to its socket by a raw client (what a
// compromised collector can do): each forged, stale, reused or malformed command gets its code
// and a reason, one info line, and nothing is accepted. The guard's own unit tests are in
// executor/guard/verify-command.test.ts; this file proves the same refusals hold on the wire.
import { createHmac, sign } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { credentials, Metadata } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ExecutorServiceClient,
  RefusalCode,
  type AuthorizeCommandRequest,
  type AuthorizeCommandResponse,
} from '../../proto/index.js';
import { systemClock } from '../../shared/clock.js';
import type { Service } from '../../shared/lifecycle/service.js';
import {
  COMMAND_JWS_ALG,
  COMMAND_JWS_TYPE,
  MAX_COMMAND_LIFETIME_SEC,
} from '../../shared/signed-command/claims.js';
import {
  generateCommandKeyPair,
  newCommandNonce,
} from '../../shared/signed-command/sign-command.js';
import { createCommandGuard } from '../../executor/guard/authorize-command.js';
import { createCommandVerifier, loadCommandKeys } from '../../executor/guard/verify-command.js';
import { createExecutorServer } from '../../executor/server/executor-server.js';
import { captureLogger } from '../helpers/executor-socket.js';

const platform = generateCommandKeyPair();
/** Nonces the executor remembers at once in this test: small, so the limit is reachable. */
const MAX_NONCES = 3;

const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');

/** A compact JWS over any header and payload, signed with the platform's real key. */
function jwsOf(header: Record<string, unknown>, payload: Record<string, unknown>): string {
  const input = `${b64(header)}.${b64(payload)}`;
  const signature = sign(null, Buffer.from(input), platform.privateKeyPem).toString('base64url');
  return `${input}.${signature}`;
}

const HEADER = { alg: COMMAND_JWS_ALG, kid: 'platform-1', typ: COMMAND_JWS_TYPE };

const request = (requestId: string): AuthorizeCommandRequest => ({
  requestId,
  permission: 'cluster:node_write',
  target: { kind: 'node', namespace: '', name: 'worker-1', container: '', resource: '' },
  verb: 'cordon',
});

/** The claims that match a request exactly, valid for a minute from now. */
function claimsFor(req: AuthorizeCommandRequest, over: Record<string, unknown> = {}) {
  const now = Math.floor(Date.now() / 1000);
  return {
    request_id: req.requestId,
    principal: 'alice@example.com',
    permission: req.permission,
    target: req.target,
    verb: req.verb,
    iat: now,
    exp: now + 60,
    nonce: newCommandNonce(),
    ...over,
  };
}

interface RefusalCase {
  readonly name: string;
  readonly code: RefusalCode;
  /** Text the reason must contain. */
  readonly reason: string;
  /** The request and the command sent with it. */
  readonly build: () => { request: AuthorizeCommandRequest; jws: string };
}

const now = () => Math.floor(Date.now() / 1000);

const CASES: readonly RefusalCase[] = [
  {
    name: 'a verb that does not apply to the target kind',
    code: RefusalCode.REFUSAL_CODE_INVALID_REQUEST,
    reason: 'does not apply to a target of kind',
    build: () => {
      const req = {
        ...request('r-kind'),
        target: { kind: 'pod', namespace: 'a', name: 'b', container: 'c', resource: '' },
      };
      return { request: req, jws: jwsOf(HEADER, claimsFor(req)) };
    },
  },
  {
    name: 'a node job claiming the console permission',
    code: RefusalCode.REFUSAL_CODE_INVALID_REQUEST,
    reason: 'needs the platform permission cluster:node_write',
    build: () => {
      const req = { ...request('r-perm'), permission: 'cluster:node_console' };
      return { request: req, jws: jwsOf(HEADER, claimsFor(req)) };
    },
  },
  {
    name: 'no command at all',
    code: RefusalCode.REFUSAL_CODE_SIGNATURE_INVALID,
    reason: 'carries no signed command',
    build: () => ({ request: request('r-empty'), jws: '' }),
  },
  {
    name: 'alg "none" with no signature',
    code: RefusalCode.REFUSAL_CODE_SIGNATURE_INVALID,
    reason: `alg must be ${COMMAND_JWS_ALG}`,
    build: () => {
      const req = request('r-none');
      return { request: req, jws: `${b64({ ...HEADER, alg: 'none' })}.${b64(claimsFor(req))}.` };
    },
  },
  {
    name: 'HS256 keyed with the public key (algorithm confusion)',
    code: RefusalCode.REFUSAL_CODE_SIGNATURE_INVALID,
    reason: `alg must be ${COMMAND_JWS_ALG}`,
    build: () => {
      const req = request('r-hmac');
      const input = `${b64({ ...HEADER, alg: 'HS256' })}.${b64(claimsFor(req))}`;
      const mac = createHmac('sha256', platform.publicKeyPem).update(input).digest('base64url');
      return { request: req, jws: `${input}.${mac}` };
    },
  },
  {
    name: 'a key id the executor does not know',
    code: RefusalCode.REFUSAL_CODE_SIGNATURE_INVALID,
    reason: 'not in security.command_keys',
    build: () => {
      const req = request('r-kid');
      return { request: req, jws: jwsOf({ ...HEADER, kid: 'collector-made' }, claimsFor(req)) };
    },
  },
  {
    name: 'another typ',
    code: RefusalCode.REFUSAL_CODE_SIGNATURE_INVALID,
    reason: `typ must be ${COMMAND_JWS_TYPE}`,
    build: () => {
      const req = request('r-typ');
      return { request: req, jws: jwsOf({ ...HEADER, typ: 'JWT' }, claimsFor(req)) };
    },
  },
  {
    name: 'a payload altered after signing',
    code: RefusalCode.REFUSAL_CODE_SIGNATURE_INVALID,
    reason: 'does not verify',
    build: () => {
      const req = request('r-alter');
      const [header = '', , signature = ''] = jwsOf(HEADER, claimsFor(req)).split('.');
      const widened = b64(claimsFor(req, { principal: 'root@example.com' }));
      return { request: req, jws: `${header}.${widened}.${signature}` };
    },
  },
  {
    name: 'not a compact JWS',
    code: RefusalCode.REFUSAL_CODE_SIGNATURE_INVALID,
    reason: 'not a compact JWS',
    build: () => ({ request: request('r-parts'), jws: 'a.b' }),
  },
  {
    name: 'an oversized command',
    code: RefusalCode.REFUSAL_CODE_SIGNATURE_INVALID,
    reason: 'exceeds 8192 bytes',
    build: () => {
      const req = request('r-big');
      return { request: req, jws: jwsOf(HEADER, claimsFor(req, { pad: 'x'.repeat(9000) })) };
    },
  },
  {
    name: 'a short nonce',
    code: RefusalCode.REFUSAL_CODE_SIGNATURE_INVALID,
    reason: 'nonce must be a string of at least',
    build: () => {
      const req = request('r-nonce');
      return { request: req, jws: jwsOf(HEADER, claimsFor(req, { nonce: 'abc' })) };
    },
  },
  {
    name: 'no principal',
    code: RefusalCode.REFUSAL_CODE_SIGNATURE_INVALID,
    reason: 'principal is missing',
    build: () => {
      const req = request('r-principal');
      return { request: req, jws: jwsOf(HEADER, claimsFor(req, { principal: '' })) };
    },
  },
  {
    name: 'an expired command',
    code: RefusalCode.REFUSAL_CODE_SIGNATURE_EXPIRED,
    reason: 'has expired',
    build: () => {
      const req = request('r-expired');
      return {
        request: req,
        jws: jwsOf(HEADER, claimsFor(req, { iat: now() - 120, exp: now() - 60 })),
      };
    },
  },
  {
    name: 'a command issued in the future',
    code: RefusalCode.REFUSAL_CODE_SIGNATURE_EXPIRED,
    reason: 'issued in the future',
    build: () => {
      const req = request('r-future');
      return {
        request: req,
        jws: jwsOf(HEADER, claimsFor(req, { iat: now() + 600, exp: now() + 660 })),
      };
    },
  },
  {
    name: 'a lifetime beyond the maximum',
    code: RefusalCode.REFUSAL_CODE_SIGNATURE_EXPIRED,
    reason: '',
    build: () => {
      const req = request('r-long');
      return {
        request: req,
        jws: jwsOf(HEADER, claimsFor(req, { exp: now() + MAX_COMMAND_LIFETIME_SEC + 60 })),
      };
    },
  },
  ...(
    [
      ['request id', { request_id: 'another-request' }],
      ['permission', { permission: 'cluster:node_console' }],
      ['verb', { verb: 'drain' }],
      [
        'target name',
        { target: { kind: 'node', namespace: '', name: 'worker-2', container: '', resource: '' } },
      ],
    ] as const
  ).map(([what, over]): RefusalCase => ({
    name: `a genuine command for another ${what}`,
    code: RefusalCode.REFUSAL_CODE_SIGNATURE_MISMATCH,
    reason: `names another ${what}`,
    build: () => {
      const req = request(`r-mismatch-${what}`);
      return { request: req, jws: jwsOf(HEADER, claimsFor(req, over)) };
    },
  })),
  {
    name: 'a genuine command for a gate that is off',
    code: RefusalCode.REFUSAL_CODE_GATE_DISABLED,
    reason: 'gate is off',
    build: () => {
      const req: AuthorizeCommandRequest = {
        requestId: 'r-gate',
        permission: 'cluster:node_write',
        target: {
          kind: 'resource',
          namespace: 'a',
          name: 'b',
          container: '',
          resource: 'apps/deployments',
        },
        verb: 'scale',
      };
      return { request: req, jws: jwsOf(HEADER, claimsFor(req)) };
    },
  },
];

describe('every guard refusal, as a compromised collector sends it to the socket', () => {
  let dir = '';
  let server: Service | undefined;
  let client: ExecutorServiceClient | undefined;
  const { logger, lines } = captureLogger();

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'kubexa-guard-'));
    const socketPath = join(dir, 'executor', 'executor.sock');
    const verifier = createCommandVerifier({
      keys: loadCommandKeys([{ id: 'platform-1', public_key: platform.publicKeyPem }]),
      clock: systemClock,
      maxNonces: MAX_NONCES,
    });
    server = createExecutorServer(
      {
        socketPath,
        ownUid: process.getuid?.() ?? -1,
        enabledGates: [],
        guard: createCommandGuard(verifier, new Set(['nodeOps'])),
        shutdownTimeoutMs: 2_000,
      },
      { logger },
    );
    await server.start(new AbortController().signal);
    client = new ExecutorServiceClient(`unix://${socketPath}`, credentials.createInsecure());
  });

  afterAll(async () => {
    client?.close();
    await server?.close();
    await rm(dir, { recursive: true, force: true });
  });

  const authorize = (req: AuthorizeCommandRequest, jws: string) =>
    new Promise<AuthorizeCommandResponse>((resolve, reject) => {
      if (client === undefined) throw new Error('beforeAll did not run');
      client.authorizeCommand({ ...req, command: { jws } }, new Metadata(), (err, response) => {
        if (err !== null) reject(err);
        else resolve(response);
      });
    });

  it.each(CASES)('refuses $name', async ({ build, code, reason }) => {
    const { request: req, jws } = build();
    const answer = await authorize(req, jws);
    expect(answer.accepted).toBe(false);
    expect(answer.refusal?.code).toBe(code);
    expect(answer.refusal?.reason).toContain(reason);
    expect(answer.refusal?.reason.length).toBeGreaterThan(0);
    // The refusal is logged with its request id and code; never the command itself.
    const logged = lines().filter((line) => JSON.stringify(line).includes(req.requestId));
    expect(logged.length).toBeGreaterThan(0);
    if (jws.length > 20) expect(JSON.stringify(logged)).not.toContain(jws);
  });

  it('refuses new commands once the nonce cache is full (LIMIT_REACHED)', async () => {
    // Genuine commands until the cache is full (a command refused at the gate has spent its
    // nonce too), then one more.
    const answers: AuthorizeCommandResponse[] = [];
    for (let i = 0; i <= MAX_NONCES; i += 1) {
      const req = request(`r-fill-${String(i)}`);
      const answer = await authorize(req, jwsOf(HEADER, claimsFor(req)));
      answers.push(answer);
      if (!answer.accepted) break;
    }
    const last = answers.at(-1);
    expect(answers.filter((a) => a.accepted).length).toBeGreaterThan(0);
    expect(answers.filter((a) => a.accepted).length).toBeLessThanOrEqual(MAX_NONCES);
    expect(last?.accepted).toBe(false);
    expect(last?.refusal?.code).toBe(RefusalCode.REFUSAL_CODE_LIMIT_REACHED);
  });
});
