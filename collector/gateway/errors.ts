/**
 * Codes of gateway failures the agent cannot recover from by retrying. They belong in the
 * shared ErrorCode union once shared/errors.ts settles; until then they live here.
 */
export type GatewayFatalCode =
  'ERR_GATEWAY_UNAUTHENTICATED' | 'ERR_GATEWAY_UNIMPLEMENTED' | 'ERR_GATEWAY_PROTO_VERSION';

/**
 * The stream stopped for good: retrying cannot help, a person must change something. The
 * message says what; main.ts prints it and exits non-zero.
 */
export class GatewayFatalError extends Error {
  readonly code: GatewayFatalCode;

  constructor(code: GatewayFatalCode, message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'GatewayFatalError';
    this.code = code;
  }
}
