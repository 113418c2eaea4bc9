// The platform's signed command (docs/security.md, proto/executor/v1/command.proto): the claims
// a privileged request carries, shared by whoever signs (the platform, the demo gateway, tests)
// and the executor, which verifies.

/** Platform permissions a signed command can claim. */
export const COMMAND_PERMISSIONS = ['cluster:node_console', 'cluster:node_write'] as const;
export type CommandPermission = (typeof COMMAND_PERMISSIONS)[number];

/** The JWS "typ" of a signed command; anything else is refused. */
export const COMMAND_JWS_TYPE = 'kubexa-command+jws';
/** The one signature algorithm accepted: Ed25519 (RFC 8037 "EdDSA"). */
export const COMMAND_JWS_ALG = 'EdDSA';
/** The longest lifetime (exp - iat) a command may claim, in seconds. */
export const MAX_COMMAND_LIFETIME_SEC = 300;
/** How far a signer's clock may run ahead of the executor's, in seconds. */
export const COMMAND_CLOCK_SKEW_SEC = 30;
/** Nonces shorter than this are refused: they must be unguessable and unique. */
export const MIN_NONCE_LENGTH = 16;

export interface CommandTargetClaim {
  /** "pod", "node" or "resource". */
  readonly kind: string;
  readonly namespace: string;
  readonly name: string;
  readonly container: string;
  /** "group/resource" for kind "resource"; empty elsewhere. */
  readonly resource: string;
}

/** The JWS payload, in its JSON spelling. */
export interface CommandClaims {
  readonly request_id: string;
  /** Who asked, as the platform authenticated them. */
  readonly principal: string;
  readonly permission: CommandPermission;
  readonly target: CommandTargetClaim;
  readonly verb: string;
  /** Issued at, seconds since the epoch. */
  readonly iat: number;
  /** Expires at, seconds since the epoch. */
  readonly exp: number;
  readonly nonce: string;
  /**
   * The console session a re-attach is for (verb "console_attach"); absent elsewhere. The
   * executor accepts an attach only with a fresh signature naming the session it re-attaches.
   */
  readonly session_id?: string;
}

export interface CommandJwsHeader {
  readonly alg: typeof COMMAND_JWS_ALG;
  readonly kid: string;
  readonly typ: typeof COMMAND_JWS_TYPE;
}
