/** Stable error codes: Node core's ERR_* style, one per outcome a caller must treat differently. */
export type ErrorCode =
  'ERR_CONFIG_INVALID' | 'ERR_GATE_DISABLED' | 'ERR_POLICY_DENIED' | 'ERR_EXECUTOR_UNAVAILABLE';

/** The base of every error the agent throws on purpose; `code` is what callers branch on. */
export class AgentError extends Error {
  readonly code: ErrorCode;

  constructor(code: ErrorCode, message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'AgentError';
    this.code = code;
  }
}

/** Text of any thrown value, without assuming it is an Error. */
export function getErrorMessage(err: unknown): string {
  if (err instanceof Error) return err.message;
  return String(err);
}
