// An HTTPS proxy in front of the test API server that terminates TLS (the fixture certificate) and
// passes WebSocket upgrades through, after taking chosen subprotocols out of the client's offer
// (Sec-WebSocket-Protocol). With `v5.channel.k8s.io` taken out, the API server negotiates
// `v4.channel.k8s.io` as one that does not offer v5 would. Every upgrade is recorded: what the
// client offered, what reached the API server, and the protocol the API server chose.
import { request as httpsRequest } from 'node:https';
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { KubeConfig } from '@kubernetes/client-node';
import { createProxyServer, forwardRequest, listenProxy, upstreamOf } from './api-server-proxy.js';

export interface RecordedUpgrade {
  readonly path: string;
  /** The client's Sec-WebSocket-Protocol list, in its order. */
  readonly offered: readonly string[];
  /** The list the API server received. */
  readonly forwarded: readonly string[];
  /** The answer's status (101 when upgraded). */
  readonly status: number;
  /** The protocol the API server chose ('' when none). */
  readonly negotiated: string;
}

export interface ExecProtocolProxy {
  readonly upgrades: RecordedUpgrade[];
  /** A KubeConfig that reaches the API server through the proxy with this bearer token. */
  kubeConfigFor(token: string): KubeConfig;
  close(): Promise<void>;
}

function protocols(value: string | string[] | undefined): string[] {
  const text = Array.isArray(value) ? value.join(',') : (value ?? '');
  return text
    .split(',')
    .map((p) => p.trim())
    .filter((p) => p !== '');
}

/** The head of an HTTP/1.1 answer as the API server sent it. */
function responseHead(answer: IncomingMessage): string {
  const lines = [`HTTP/1.1 ${String(answer.statusCode ?? 502)} ${answer.statusMessage ?? ''}`];
  for (let i = 0; i + 1 < answer.rawHeaders.length; i += 2) {
    lines.push(`${answer.rawHeaders[i] ?? ''}: ${answer.rawHeaders[i + 1] ?? ''}`);
  }
  return `${lines.join('\r\n')}\r\n\r\n`;
}

/** `admin` names the API server and its CA; its own credentials are never used. */
export async function startExecProtocolProxy(
  admin: KubeConfig,
  options: { readonly drop: readonly string[] },
): Promise<ExecProtocolProxy> {
  const target = upstreamOf(admin);
  const upgrades: RecordedUpgrade[] = [];
  const sockets = new Set<Duplex>();

  const server = createProxyServer((incoming, outgoing) => {
    forwardRequest(target, incoming, outgoing);
  });

  server.on('upgrade', (incoming: IncomingMessage, client: Duplex, head: Buffer) => {
    sockets.add(client);
    client.once('close', () => sockets.delete(client));
    client.on('error', () => undefined);
    const offered = protocols(incoming.headers['sec-websocket-protocol']);
    const kept = offered.filter((p) => !options.drop.includes(p));
    const headers: IncomingHttpHeaders = { ...incoming.headers };
    delete headers.host;
    if (kept.length > 0) headers['sec-websocket-protocol'] = kept.join(', ');
    else delete headers['sec-websocket-protocol'];
    const path = incoming.url ?? '/';
    const record = (status: number, negotiated: string) => {
      upgrades.push({ path, offered, forwarded: kept, status, negotiated });
    };
    const forwarded = httpsRequest({ ...target, method: incoming.method, path, headers });
    forwarded.on('upgrade', (answer: IncomingMessage, server: Duplex, serverHead: Buffer) => {
      sockets.add(server);
      server.once('close', () => sockets.delete(server));
      record(answer.statusCode ?? 0, protocols(answer.headers['sec-websocket-protocol'])[0] ?? '');
      client.write(responseHead(answer));
      if (serverHead.length > 0) client.write(serverHead);
      if (head.length > 0) server.write(head);
      server.pipe(client);
      client.pipe(server);
      const end = () => {
        client.destroy();
        server.destroy();
      };
      server.on('error', end).on('close', end);
      client.on('close', end);
    });
    forwarded.on('response', (answer: IncomingMessage) => {
      // Refused (403, 404, 400): the answer goes back with its body, then the connection ends.
      record(answer.statusCode ?? 0, '');
      const chunks: Buffer[] = [];
      answer.on('data', (chunk: Buffer) => chunks.push(chunk));
      answer.once('end', () => {
        const body = Buffer.concat(chunks);
        client.end(
          Buffer.concat([
            Buffer.from(
              `HTTP/1.1 ${String(answer.statusCode ?? 502)} ${answer.statusMessage ?? ''}\r\n` +
                `Content-Type: ${answer.headers['content-type'] ?? 'text/plain'}\r\n` +
                `Content-Length: ${String(body.length)}\r\nConnection: close\r\n\r\n`,
            ),
            body,
          ]),
        );
      });
    });
    forwarded.on('error', () => {
      client.destroy();
    });
    forwarded.end();
  });

  const listening = await listenProxy(server, 'exec-protocol-proxy');
  return {
    upgrades,
    kubeConfigFor: (token) => listening.kubeConfigFor(token),
    close: () => listening.close(sockets),
  };
}
