// The demo gateway's command signer: a key pair generated at start, whose public half is written
// into the executor's security.command_keys (scripts/demo.ts), and whose private half signs every
// privileged request the demo page sends (consoles here; node jobs reuse signCommand below). The
// real platform signs with its own key; the executor cannot tell the difference, which is the point.
import type { CommandClaims, CommandTargetClaim } from '../shared/signed-command/claims.js';
import {
  generateCommandKeyPair,
  newCommandNonce,
  signCommand,
} from '../shared/signed-command/sign-command.js';

/** How long a signed command stays valid: enough for the relay, far below the 300 s maximum. */
const LIFETIME_SEC = 60;

export interface CommandSigner {
  readonly keyId: string;
  /** SPKI PEM: what goes into the executor's security.command_keys[].public_key. */
  readonly publicKeyPem: string;
  /** Signs one request: its id, principal, permission, target and verb, with a fresh nonce. */
  sign(request: {
    readonly requestId: string;
    readonly principal: string;
    readonly permission: CommandClaims['permission'];
    readonly target: CommandTargetClaim;
    readonly verb: string;
    /** Only for a console re-attach: the session it is for. */
    readonly sessionId?: string;
  }): string;
  /** The signature a pod console open carries. */
  signConsoleOpen(
    requestId: string,
    principal: string,
    target: { readonly namespace: string; readonly pod: string; readonly container: string },
  ): string;
  /**
   * The fresh signature every console re-attach carries: verb console_attach, bound to the
   * session (its id, its target with the resolved container, the principal it was opened for).
   */
  signConsoleAttach(
    requestId: string,
    principal: string,
    sessionId: string,
    target: { readonly namespace: string; readonly pod: string; readonly container: string },
  ): string;
}

export function createCommandSigner(keyId = 'demo-gateway'): CommandSigner {
  const keys = generateCommandKeyPair();
  const sign: CommandSigner['sign'] = (request) => {
    const nowSec = Math.floor(Date.now() / 1000);
    return signCommand(
      {
        request_id: request.requestId,
        principal: request.principal,
        permission: request.permission,
        target: request.target,
        verb: request.verb,
        iat: nowSec,
        exp: nowSec + LIFETIME_SEC,
        nonce: newCommandNonce(),
        ...(request.sessionId === undefined ? {} : { session_id: request.sessionId }),
      },
      { keyId, privateKey: keys.privateKeyPem },
    );
  };
  return {
    keyId,
    publicKeyPem: keys.publicKeyPem,
    sign,
    signConsoleOpen: (requestId, principal, target) =>
      sign({
        requestId,
        principal,
        permission: 'cluster:node_console',
        target: {
          kind: 'pod',
          namespace: target.namespace,
          name: target.pod,
          container: target.container,
          resource: '',
        },
        verb: 'console',
      }),
    signConsoleAttach: (requestId, principal, sessionId, target) =>
      sign({
        requestId,
        principal,
        permission: 'cluster:node_console',
        target: {
          kind: 'pod',
          namespace: target.namespace,
          name: target.pod,
          container: target.container,
          resource: '',
        },
        verb: 'console_attach',
        sessionId,
      }),
  };
}
