// A compromised collector talking straight to the executor's socket: it holds no signing key, so
// whatever it sends (unsigned, self-signed, altered, replayed) is refused with a code; only a
// command the platform signed, relayed untouched, is accepted, and the verified principal is
// recorded.
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
import type { CommandClaims } from '../../shared/signed-command/claims.js';
import {
  generateCommandKeyPair,
  newCommandNonce,
  signCommand,
} from '../../shared/signed-command/sign-command.js';
import { createCommandGuard } from '../../executor/guard/authorize-command.js';
import { createCommandVerifier, loadCommandKeys } from '../../executor/guard/verify-command.js';
import { createExecutorServer } from '../../executor/server/executor-server.js';
import { captureLogger } from '../helpers/executor-socket.js';

/** The platform's key: only its public half is in the executor's configuration. */
const platform = generateCommandKeyPair();

function platformSigned(request: AuthorizeCommandRequest, principal = 'alice@example.com') {
  const nowSec = Math.floor(Date.now() / 1000);
  const target = request.target ?? {
    kind: '',
    namespace: '',
    name: '',
    container: '',
    resource: '',
  };
  const claims: CommandClaims = {
    request_id: request.requestId,
    principal,
    permission: request.permission as CommandClaims['permission'],
    target,
    verb: request.verb,
    iat: nowSec,
    exp: nowSec + 60,
    nonce: newCommandNonce(),
  };
  return signCommand(claims, { keyId: 'platform-1', privateKey: platform.privateKeyPem });
}

const consoleRequest = (requestId: string): AuthorizeCommandRequest => ({
  requestId,
  permission: 'cluster:node_console',
  target: { kind: 'pod', namespace: 'team-a', name: 'api-0', container: 'app', resource: '' },
  verb: 'console',
});

describe('signed commands through the socket, as a compromised collector sends them', () => {
  let dir = '';
  let server: Service | undefined;
  let client: ExecutorServiceClient | undefined;
  const { logger, lines } = captureLogger();

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'kubexa-signed-'));
    const socketPath = join(dir, 'executor', 'executor.sock');
    const verifier = createCommandVerifier({
      keys: loadCommandKeys([{ id: 'platform-1', public_key: platform.publicKeyPem }]),
      clock: systemClock,
    });
    server = createExecutorServer(
      {
        socketPath,
        ownUid: process.getuid?.() ?? -1,
        enabledGates: [],
        guard: createCommandGuard(verifier, new Set(['podExec', 'nodeOps'])),
        shutdownTimeoutMs: 2_000,
      },
      { logger },
    );
    await server.start(new AbortController().signal);
    // No collector code in between: the raw generated client on the socket.
    client = new ExecutorServiceClient(`unix://${socketPath}`, credentials.createInsecure());
  });

  afterAll(async () => {
    client?.close();
    await server?.close();
    await rm(dir, { recursive: true, force: true });
  });

  const authorize = (request: AuthorizeCommandRequest) =>
    new Promise<AuthorizeCommandResponse>((resolve, reject) => {
      if (client === undefined) throw new Error('beforeAll did not run');
      client.authorizeCommand(request, new Metadata(), (err, response) => {
        if (err !== null) reject(err);
        else resolve(response);
      });
    });

  it('refuses an unsigned request', async () => {
    const answer = await authorize(consoleRequest('r-unsigned'));
    expect(answer.accepted).toBe(false);
    expect(answer.refusal?.code).toBe(RefusalCode.REFUSAL_CODE_SIGNATURE_INVALID);
  });

  it('refuses a request the collector signed itself, even with the platform key id', async () => {
    const own = generateCommandKeyPair();
    const request = consoleRequest('r-self');
    const nowSec = Math.floor(Date.now() / 1000);
    const jws = signCommand(
      {
        request_id: request.requestId,
        principal: 'admin@example.com',
        permission: 'cluster:node_console',
        target: request.target!,
        verb: 'console',
        iat: nowSec,
        exp: nowSec + 60,
        nonce: newCommandNonce(),
      },
      { keyId: 'platform-1', privateKey: own.privateKeyPem },
    );
    const answer = await authorize({ ...request, command: { jws } });
    expect(answer).toMatchObject({ accepted: false, principal: '' });
    expect(answer.refusal?.code).toBe(RefusalCode.REFUSAL_CODE_SIGNATURE_INVALID);
  });

  it('refuses a genuine command relayed for another target', async () => {
    const signedFor = consoleRequest('r-retarget');
    const jws = platformSigned(signedFor);
    const retargeted: AuthorizeCommandRequest = {
      ...signedFor,
      target: { ...signedFor.target!, namespace: 'kube-system', name: 'kube-apiserver-0' },
      command: { jws },
    };
    const answer = await authorize(retargeted);
    expect(answer.refusal?.code).toBe(RefusalCode.REFUSAL_CODE_SIGNATURE_MISMATCH);
  });

  it('accepts a genuine command once, records the verified principal, and refuses its replay', async () => {
    const request = consoleRequest('r-good');
    const signed = { ...request, command: { jws: platformSigned(request) } };
    const first = await authorize(signed);
    expect(first).toMatchObject({ accepted: true, principal: 'alice@example.com' });
    const replay = await authorize(signed);
    expect(replay.refusal?.code).toBe(RefusalCode.REFUSAL_CODE_SIGNATURE_REPLAYED);
    const audit = lines().find(
      (line) => line['msg'] === 'privileged request authorized' && line['requestId'] === 'r-good',
    );
    expect(audit).toMatchObject({
      principal: 'alice@example.com',
      verb: 'console',
      gate: 'podExec',
    });
    const refused = lines().filter((line) => line['msg'] === 'privileged request refused');
    expect(refused.map((line) => line['code'])).toEqual(
      expect.arrayContaining(['SIGNATURE_INVALID', 'SIGNATURE_MISMATCH', 'SIGNATURE_REPLAYED']),
    );
  });

  it('refuses a genuine command for a gate that is off in its own configuration', async () => {
    const request: AuthorizeCommandRequest = {
      requestId: 'r-gate',
      permission: 'cluster:node_console',
      target: { kind: 'node', namespace: '', name: 'worker-1', container: '', resource: '' },
      verb: 'console',
    };
    const answer = await authorize({
      ...request,
      command: { jws: platformSigned(request, 'bob@example.com') },
    });
    expect(answer.refusal?.code).toBe(RefusalCode.REFUSAL_CODE_GATE_DISABLED);
    // Verified first, then gated: the refusal names who asked, in the answer and the audit line.
    expect(answer.principal).toBe('bob@example.com');
    const audit = lines().find(
      (line) => line['msg'] === 'privileged request refused' && line['requestId'] === 'r-gate',
    );
    expect(audit).toMatchObject({ code: 'GATE_DISABLED', principal: 'bob@example.com' });
  });

  it('names no principal when the signature does not verify, gate off or not', async () => {
    const request: AuthorizeCommandRequest = {
      requestId: 'r-gate-unsigned',
      permission: 'cluster:node_console',
      target: { kind: 'node', namespace: '', name: 'worker-1', container: '', resource: '' },
      verb: 'console',
    };
    const jws = platformSigned({ ...request, requestId: 'another-request' });
    const answer = await authorize({ ...request, command: { jws } });
    expect(answer).toMatchObject({ accepted: false, principal: '' });
    expect(answer.refusal?.code).toBe(RefusalCode.REFUSAL_CODE_SIGNATURE_MISMATCH);
  });
});
