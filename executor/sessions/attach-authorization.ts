// Re-attaching a console session is a privileged request of its own: it hands a running process
// (and its output) to whoever holds the stream. So an attach carries a fresh platform-signed
// command, verified like an open's (configured key, lifetime, unused nonce) and bound to the
// session: verb console_attach, the session's target, claim session_id = the session's id, and
// the principal the session was opened for. A session id alone never re-attaches.
import { RefusalCode, type ConsoleAudit, type Refusal } from '../../proto/index.js';
import type { AuthorizationRefusalCode, CommandGuard } from '../guard/authorize-command.js';
import type { ConsoleSession } from './console-session.js';

const REFUSAL_BY_GUARD: Record<AuthorizationRefusalCode, RefusalCode> = {
  SIGNATURE_INVALID: RefusalCode.REFUSAL_CODE_SIGNATURE_INVALID,
  SIGNATURE_EXPIRED: RefusalCode.REFUSAL_CODE_SIGNATURE_EXPIRED,
  SIGNATURE_REPLAYED: RefusalCode.REFUSAL_CODE_SIGNATURE_REPLAYED,
  SIGNATURE_MISMATCH: RefusalCode.REFUSAL_CODE_SIGNATURE_MISMATCH,
  LIMIT_REACHED: RefusalCode.REFUSAL_CODE_LIMIT_REACHED,
  INVALID_REQUEST: RefusalCode.REFUSAL_CODE_INVALID_REQUEST,
  GATE_DISABLED: RefusalCode.REFUSAL_CODE_GATE_DISABLED,
};

/** The refusal of an attach to `session` with `jws`, or undefined when it may re-attach. */
export function attachRefusal(
  guard: CommandGuard,
  session: ConsoleSession,
  jws: string,
): Refusal | undefined {
  const target = session.description.target;
  const decision = guard.authorize(jws, {
    // Not compared: an attach's request id names the gateway's call, which the executor never
    // sees; the command is bound to the session instead.
    requestId: '',
    sessionId: session.id,
    permission: 'cluster:node_console',
    target: {
      kind: target.kind,
      namespace: target.namespace,
      name: target.name,
      container: target.container,
      resource: target.resource,
    },
    verb: 'console_attach',
  });
  if (!decision.accepted) {
    return { code: REFUSAL_BY_GUARD[decision.code], reason: decision.reason.slice(0, 512) };
  }
  if (decision.principal !== session.description.principal) {
    return {
      code: RefusalCode.REFUSAL_CODE_SIGNATURE_MISMATCH,
      reason: 'the signed attach names another principal than the one the session was opened for',
    };
  }
  return undefined;
}

/** The audit record of a refused attach: the session it named, and why. */
export function attachRefusalRecord(session: ConsoleSession, refusal: Refusal): ConsoleAudit {
  const now = String(Date.now());
  return {
    ...session.auditRecord('close'),
    event: 'refusal',
    // Who was refused is not established (the signature did not pass, or named another).
    principal: '',
    startUnixMs: now,
    endUnixMs: now,
    exitCode: 0,
    endReason: 0,
    bytesIn: '0',
    bytesOut: '0',
    refusal,
  };
}
