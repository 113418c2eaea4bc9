/** The agent's version, reported in the handshake and by the executor. */
export const AGENT_VERSION = '0.1.0';
