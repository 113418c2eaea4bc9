// Parses the config's listen addresses (":8080", "127.0.0.1:8080", "[::1]:8080") the way the Go
// agent's net.Listen does: an empty host means every interface.
export interface ListenAddress {
  readonly host: string;
  readonly port: number;
}

export function parseListenAddress(address: string, key: string): ListenAddress {
  const match = /^(?:\[([^\]]+)\]|([^:]*)):(\d{1,5})$/.exec(address.trim());
  const port = match?.[3] === undefined ? Number.NaN : Number.parseInt(match[3], 10);
  if (match === null || !Number.isInteger(port) || port > 65535) {
    throw new Error(
      `${key}: "${address}" is not host:port; write for example ":8080" or "127.0.0.1:8080"`,
    );
  }
  const host = match[1] ?? match[2] ?? '';
  return { host: host === '' ? '0.0.0.0' : host, port };
}
