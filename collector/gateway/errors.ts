import { AgentError, type ErrorCode } from '../../shared/errors.js';

/** Codes of gateway failures the agent cannot recover from by retrying. */
export type GatewayFatalCode = Extract<
  ErrorCode,
  'ERR_GATEWAY_UNAUTHENTICATED' | 'ERR_GATEWAY_UNIMPLEMENTED' | 'ERR_GATEWAY_PROTO_VERSION'
>;

/**
 * The stream stopped for good: retrying cannot help, a person must change something. The
 * message says what; main.ts prints it and exits non-zero.
 */
export class GatewayFatalError extends AgentError {
  declare readonly code: GatewayFatalCode;

  constructor(code: GatewayFatalCode, message: string, options?: ErrorOptions) {
    super(code, message, options);
    this.name = 'GatewayFatalError';
  }
}
