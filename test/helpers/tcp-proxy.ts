// A TCP proxy in front of a test server (the test API server, a gateway), so a test can break
// the network path the way a load balancer or a node's conntrack does: cut() resets every open
// connection, freeze() stops forwarding on them without closing (a half-open connection), hold()
// keeps new connections waiting (accepted, not yet forwarded: a network path that is down for a
// while) until release(). New connections otherwise pass normally.
import { createServer, connect, type Socket } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';

export interface TcpForwarder {
  /** The proxy's port on 127.0.0.1. */
  readonly port: number;
  /** Connections currently open through the proxy. */
  open(): number;
  /** Connections accepted since the proxy started, open or closed. */
  accepted(): number;
  /** Destroys every open connection on both sides. */
  cut(): void;
  /**
   * Stops forwarding on every open connection (or only on the `oldest` ones opened first) and
   * leaves it open until its client closes it.
   */
  freeze(oldest?: number): void;
  /** New connections wait, accepted but not forwarded, until release(). */
  hold(): void;
  /** Forwards the connections hold() kept waiting, and every new one again. */
  release(): void;
  close(): Promise<void>;
}

export interface TcpProxy extends Omit<TcpForwarder, 'port'> {
  /** A KubeConfig like the given one whose current cluster goes through the proxy. */
  readonly kubeConfig: KubeConfig;
}

/** Forwards 127.0.0.1:<port> to host:port. */
export async function startTcpForwarder(host: string, port: number): Promise<TcpForwarder> {
  const pairs = new Set<{ client: Socket; server: Socket }>();
  let held: Socket[] | undefined;
  let accepted = 0;
  const forward = (client: Socket): void => {
    if (client.destroyed) return;
    const server = connect(port, host);
    const pair = { client, server };
    pairs.add(pair);
    client.pipe(server);
    server.pipe(client);
    const end = (): void => {
      pairs.delete(pair);
      client.destroy();
      server.destroy();
    };
    client.on('error', end).on('close', end);
    server.on('error', end).on('close', end);
  };
  const proxy = createServer((client) => {
    accepted += 1;
    if (held === undefined) {
      forward(client);
      return;
    }
    // Waiting: the bytes the client sends stay in its socket's buffer until forwarded.
    client.pause();
    client.on('error', () => client.destroy());
    held.push(client);
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  const address = proxy.address();
  if (address === null || typeof address === 'string') throw new Error('proxy has no port');
  return {
    port: address.port,
    open: () => pairs.size,
    accepted: () => accepted,
    cut() {
      for (const { client, server } of pairs) {
        client.resetAndDestroy();
        server.destroy();
      }
      pairs.clear();
    },
    freeze(oldest = Number.POSITIVE_INFINITY) {
      for (const { client, server } of [...pairs].slice(0, oldest)) {
        client.unpipe(server);
        server.unpipe(client);
        client.pause();
        server.pause();
      }
    },
    hold() {
      held ??= [];
    },
    release() {
      const waiting = held ?? [];
      held = undefined;
      // pipe() in forward() resumes each one with what it buffered meanwhile.
      for (const client of waiting) forward(client);
    },
    async close() {
      for (const client of held ?? []) client.destroy();
      held = undefined;
      for (const { client, server } of pairs) {
        client.destroy();
        server.destroy();
      }
      await new Promise<void>((resolve) => {
        proxy.close(() => {
          resolve();
        });
      });
    },
  };
}

export async function startTcpProxy(kc: KubeConfig): Promise<TcpProxy> {
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new Error('the kubeconfig has no current cluster');
  const upstream = new URL(cluster.server);
  const forwarder = await startTcpForwarder(upstream.hostname, Number(upstream.port || 443));
  const via = new KubeConfig();
  via.loadFromOptions({
    clusters: kc.clusters.map((c) =>
      c.name === cluster.name
        ? { ...c, server: `${upstream.protocol}//127.0.0.1:${String(forwarder.port)}` }
        : c,
    ),
    users: kc.users,
    contexts: kc.contexts,
    currentContext: kc.currentContext,
  });
  return {
    kubeConfig: via,
    open: () => forwarder.open(),
    accepted: () => forwarder.accepted(),
    cut: () => {
      forwarder.cut();
    },
    freeze: (oldest?: number) => {
      forwarder.freeze(oldest);
    },
    hold: () => {
      forwarder.hold();
    },
    release: () => {
      forwarder.release();
    },
    close: () => forwarder.close(),
  };
}
