/** Stable error codes: Node core's ERR_* style, one per outcome a caller must treat differently. */
export type ErrorCode =
  | 'ERR_CONFIG_INVALID'
  | 'ERR_GATE_DISABLED'
  | 'ERR_POLICY_DENIED'
  | 'ERR_EXECUTOR_UNAVAILABLE'
  /** The gateway refused our credentials (gRPC UNAUTHENTICATED): fix the tenant token. */
  | 'ERR_GATEWAY_UNAUTHENTICATED'
  /** The address does not serve agent.v1.AgentService (gRPC UNIMPLEMENTED). */
  | 'ERR_GATEWAY_UNIMPLEMENTED'
  /** No protocol version in common with the gateway: upgrade the agent. */
  | 'ERR_GATEWAY_PROTO_VERSION';

/** The base of every error the agent throws on purpose; `code` is what callers branch on. */
export class AgentError extends Error {
  readonly code: ErrorCode;

  constructor(code: ErrorCode, message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'AgentError';
    this.code = code;
  }
}

/** One problem in the agent's configuration: the key it concerns and what to do about it. */
export interface ConfigIssue {
  /** Full key path such as `collect.logs.rules[0].tail_lines`; empty for the file as a whole. */
  readonly path: string;
  /** What is wrong and how to fix it. Never contains a secret value. */
  readonly message: string;
}

/** `path: message`, the one way a config issue is printed. */
export function formatConfigIssue(issue: ConfigIssue): string {
  return issue.path === '' ? issue.message : `${issue.path}: ${issue.message}`;
}

/**
 * The configuration cannot be used. Carries every issue found in one pass (so an operator fixes
 * them all in one edit) and the warnings collected on the way, which callers print first.
 */
export class ConfigError extends AgentError {
  readonly issues: readonly ConfigIssue[];
  readonly warnings: readonly string[];

  constructor(issues: readonly ConfigIssue[], warnings: readonly string[] = []) {
    const count = issues.length === 1 ? '1 problem' : `${issues.length} problems`;
    const lines = issues.map((issue) => `\n  - ${formatConfigIssue(issue)}`).join('');
    super('ERR_CONFIG_INVALID', `invalid configuration (${count}):${lines}`);
    this.name = 'ConfigError';
    this.issues = Object.freeze([...issues]);
    this.warnings = Object.freeze([...warnings]);
  }
}

/** Text of any thrown value, without assuming it is an Error. */
export function getErrorMessage(err: unknown): string {
  if (err instanceof Error) return err.message;
  return String(err);
}
