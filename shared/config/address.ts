// host:port addresses: the gateway the collector dials, and the addresses its listeners bind.
// Each is one anchored pattern, valid in JavaScript and RE2, so the chart's values schema refuses
// exactly what the agent refuses.

export const PORT_PATTERN =
  '(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])';
/** A DNS name or IPv4 address. */
export const HOST_PATTERN = '[A-Za-z0-9](?:[-A-Za-z0-9.]*[A-Za-z0-9])?';
const IPV6 = '\\[[0-9A-Fa-f:.]+\\]';

/** host:port with a host, as the gateway address is dialled. */
export const GATEWAY_ADDRESS_PATTERN = `^(?:${HOST_PATTERN}|${IPV6}):${PORT_PATTERN}$`;
/**
 * host:port or :port (every interface), as the Go agent's net.Listen reads it; port 0 is any free
 * port (tests and the demo use it; the chart refuses it, since its probes need a fixed port).
 */
export const LISTEN_ADDRESS_PATTERN = `^(?:${HOST_PATTERN}|${IPV6})?:(?:0|${PORT_PATTERN})$`;

const gatewayAddress = new RegExp(GATEWAY_ADDRESS_PATTERN);

/** Why `address` is not a gateway address and what to write instead, or undefined when it is. */
export function gatewayAddressProblem(address: string): string | undefined {
  if (gatewayAddress.test(address)) return undefined;
  const url = /^[a-z][a-z0-9+.-]*:\/\/([^/]*)/i.exec(address.trim());
  if (url !== null) {
    const hostPort = url[1] ?? '';
    const example = /:[0-9]+$/.test(hostPort)
      ? hostPort
      : `${hostPort || 'gateway.kubexa.dev'}:443`;
    return `"${address}" is a URL; write host:port without a scheme or path, e.g. ${example} (gateway.tls decides whether TLS is used)`;
  }
  if (!address.includes(':')) {
    return `"${address}" has no port; write host:port, e.g. ${address.trim() || 'gateway.kubexa.dev'}:443`;
  }
  return `"${address}" is not host:port; write e.g. gateway.kubexa.dev:443 (a port from 1 to 65535)`;
}

/** The port of a listen address that matches LISTEN_ADDRESS_PATTERN. */
export function listenPort(address: string): number {
  return Number(address.slice(address.lastIndexOf(':') + 1));
}
