// The guard over one privileged request: the signed command first (who asked, and that the
// platform really asked this), then the mapping of verb to permission and gate, then the gate
// from the executor's own configuration. Every privileged RPC calls this before it acts.
import type { CommandVerifier, CommandExpectation } from './verify-command.js';

export type GateName = 'podExec' | 'nodeShell' | 'nodeOps' | 'mutate';

export type AuthorizationRefusalCode =
  | 'SIGNATURE_INVALID'
  | 'SIGNATURE_EXPIRED'
  | 'SIGNATURE_REPLAYED'
  | 'SIGNATURE_MISMATCH'
  | 'LIMIT_REACHED'
  | 'INVALID_REQUEST'
  | 'GATE_DISABLED';

export type AuthorizationDecision =
  | { readonly accepted: true; readonly principal: string; readonly gate: GateName }
  | {
      readonly accepted: false;
      readonly code: AuthorizationRefusalCode;
      readonly reason: string;
      /**
       * The verified principal when the signature verified and a later check refused (the
       * gate); '' when the signature did not verify. Audit records name who was refused.
       */
      readonly principal: string;
    };

const NODE_JOB_VERBS = new Set(['cordon', 'uncordon', 'drain']);
const MUTATION_VERBS = new Set(['scale', 'patch', 'update', 'delete', 'create']);

/** Which gate and platform permission a verb on a target needs; undefined for nonsense. */
export function requiredGate(
  verb: string,
  targetKind: string,
): { readonly gate: GateName; readonly permission: string } | undefined {
  // console_attach: re-attaching a running session needs the same gate and permission as
  // opening it (and a signature of its own, bound to the session).
  if ((verb === 'console' || verb === 'console_attach') && targetKind === 'pod') {
    return { gate: 'podExec', permission: 'cluster:node_console' };
  }
  if ((verb === 'console' || verb === 'console_attach') && targetKind === 'node') {
    return { gate: 'nodeShell', permission: 'cluster:node_console' };
  }
  if (NODE_JOB_VERBS.has(verb) && targetKind === 'node') {
    return { gate: 'nodeOps', permission: 'cluster:node_write' };
  }
  if (MUTATION_VERBS.has(verb) && targetKind === 'resource') {
    return { gate: 'mutate', permission: 'cluster:node_write' };
  }
  return undefined;
}

export interface CommandGuard {
  authorize(jws: string, request: CommandExpectation): AuthorizationDecision;
}

export function createCommandGuard(
  verifier: CommandVerifier,
  enabledGates: ReadonlySet<GateName>,
): CommandGuard {
  return {
    authorize(jws, request) {
      const needed = requiredGate(request.verb, request.target.kind);
      if (needed === undefined) {
        return {
          accepted: false,
          code: 'INVALID_REQUEST',
          reason: `verb "${request.verb}" does not apply to a target of kind "${request.target.kind}"`,
          principal: '',
        };
      }
      if (needed.permission !== request.permission) {
        return {
          accepted: false,
          code: 'INVALID_REQUEST',
          reason: `verb "${request.verb}" needs the platform permission ${needed.permission}`,
          principal: '',
        };
      }
      // The signature is checked before the gate, so an unsigned probe learns nothing about
      // which gates are on, and a refusal for a closed gate names who asked.
      const verdict = verifier.verify(jws, request);
      if (!verdict.ok) {
        return { accepted: false, code: verdict.code, reason: verdict.reason, principal: '' };
      }
      if (!enabledGates.has(needed.gate)) {
        return {
          accepted: false,
          code: 'GATE_DISABLED',
          reason: `the ${needed.gate} gate is off in the executor's configuration`,
          principal: verdict.claims.principal,
        };
      }
      return { accepted: true, principal: verdict.claims.principal, gate: needed.gate };
    },
  };
}
