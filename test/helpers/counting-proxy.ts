// A TCP proxy in front of the test API server that counts the bytes clients send through it and
// can hold every client chunk back for a while. The count is the API server's side of "no API
// call was made" (TLS hides the requests, but a request of any kind is bytes on this path), and
// the delay makes the API server slow without touching it.
import { createServer, connect, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { KubeConfig } from '@kubernetes/client-node';

export interface CountingProxy {
  /** A KubeConfig like the given one whose current cluster is reached through the proxy. */
  readonly kubeConfig: KubeConfig;
  /** Bytes clients sent toward the API server since the proxy started. */
  bytesToServer(): number;
  /** Every client chunk from now on reaches the API server this many ms after it arrived. */
  setDelay(ms: number): void;
  close(): Promise<void>;
}

export async function startCountingProxy(kc: KubeConfig): Promise<CountingProxy> {
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new Error('the kubeconfig has no current cluster');
  const upstream = new URL(cluster.server);
  let bytes = 0;
  let delayMs = 0;
  const sockets = new Set<Socket>();
  const proxy = createServer((client) => {
    const server = connect(Number(upstream.port || 443), upstream.hostname);
    sockets.add(client).add(server);
    // Chunks go out in arrival order, each no sooner than its arrival plus the delay.
    let tail = Promise.resolve();
    client.on('data', (chunk: Buffer) => {
      bytes += chunk.length;
      const due = Date.now() + delayMs;
      tail = tail.then(async () => {
        const wait = due - Date.now();
        if (wait > 0) await sleep(wait);
        if (!server.destroyed) server.write(chunk);
      });
    });
    server.pipe(client);
    const end = (): void => {
      sockets.delete(client);
      sockets.delete(server);
      client.destroy();
      server.destroy();
    };
    client.on('error', end).on('close', end);
    server.on('error', end).on('close', end);
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  const address = proxy.address();
  if (address === null || typeof address === 'string') throw new Error('proxy has no port');
  const via = new KubeConfig();
  via.loadFromOptions({
    clusters: kc.clusters.map((c) =>
      c.name === cluster.name
        ? { ...c, server: `${upstream.protocol}//127.0.0.1:${String(address.port)}` }
        : c,
    ),
    users: kc.users,
    contexts: kc.contexts,
    currentContext: kc.currentContext,
  });
  return {
    kubeConfig: via,
    bytesToServer: () => bytes,
    setDelay(ms) {
      delayMs = ms;
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => {
        proxy.close(() => {
          resolve();
        });
      });
    },
  };
}
