/** The agent's version, reported in the handshake and by the executor. */
export const AGENT_VERSION = '0.1.0';

/**
 * A protocol version as both ends compare it: "V1 " and "v1" are the same version. The agent's
 * handshake check and the demo gateway's negotiation must agree on this, so it lives here once.
 */
export const normalizeProtoVersion = (version: string): string => version.trim().toLowerCase();
