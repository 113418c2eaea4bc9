// PodLogHttp over HTTP/2 against a real HTTPS server on loopback that speaks h2 and HTTP/1.1
// (ALPN, as the API server) with the test CA: follow streams share TLS connections, a server's
// stream limit opens another session, and every way a stream or its session ends reaches the
// read as it did over HTTP/1.1. A server without h2 is still read, over HTTP/1.1.
import { once } from 'node:events';
import http2, {
  type Http2SecureServer,
  type Http2ServerRequest,
  type Http2ServerResponse,
  type ServerHttp2Session,
} from 'node:http2';
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import { createServer as createTcpServer, type AddressInfo, type Socket } from 'node:net';
import {
  createServer as createTlsServer,
  type Server as TlsServer,
  type TLSSocket,
} from 'node:tls';
import type { KubeConfig } from '@kubernetes/client-node';
import { afterEach, describe, expect, it } from 'vitest';
import { TLS_FIXTURES } from '../../../test/helpers/gateway-harness.js';
import { singleClusterKubeConfig } from '../../../test/helpers/kube.js';
import { until } from '../../../test/helpers/wait.js';
import { PodLogHttp, PodLogRequestError } from './pod-log-http.js';
import { TurnBudget } from './turn-budget.js';

type Handler = (req: Http2ServerRequest, res: Http2ServerResponse) => void;

interface TestServer {
  readonly kube: KubeConfig;
  /** TLS connections accepted. */
  readonly connections: () => number;
  /** HTTP/2 sessions, in the order they came. */
  readonly sessions: ServerHttp2Session[];
  /** The protocol of every request served ('2.0' or '1.1'). */
  readonly versions: string[];
}

/** The server side's streams of each session, to reset one or see what is open. */
const openStreams = new WeakMap<ServerHttp2Session, http2.ServerHttp2Stream[]>();

/** The server's streams of a session that are still open. */
function streamsOf(session: ServerHttp2Session | undefined): http2.ServerHttp2Stream[] {
  return session === undefined ? [] : (openStreams.get(session) ?? []).filter((s) => !s.closed);
}

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function kubeConfigFor(port: number): KubeConfig {
  return singleClusterKubeConfig({
    server: `https://127.0.0.1:${String(port)}`,
    token: 'token-0123456789',
    caFile: TLS_FIXTURES.caPath,
  });
}

async function listen(server: Http2SecureServer | HttpsServer | TlsServer): Promise<number> {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return (server.address() as AddressInfo).port;
}

/** An HTTPS server that speaks h2 (and HTTP/1.1 to clients that ask for it), as the API server. */
async function startH2Server(handler: Handler, settings: http2.Settings = {}): Promise<TestServer> {
  let connections = 0;
  const sessions: ServerHttp2Session[] = [];
  const versions: string[] = [];
  const server = http2.createSecureServer(
    { cert: TLS_FIXTURES.cert, key: TLS_FIXTURES.key, allowHTTP1: true, settings },
    (req, res) => {
      versions.push(req.httpVersion);
      handler(req, res);
    },
  );
  server.on('secureConnection', () => connections++);
  server.on('session', (session: ServerHttp2Session) => {
    sessions.push(session);
    const streams: http2.ServerHttp2Stream[] = [];
    openStreams.set(session, streams);
    session.on('stream', (stream: http2.ServerHttp2Stream) => streams.push(stream));
  });
  const port = await listen(server);
  cleanups.push(async () => {
    for (const session of sessions) session.destroy();
    server.close();
    await once(server, 'close');
  });
  return { kube: kubeConfigFor(port), connections: () => connections, sessions, versions };
}

const follow = (pod: string) => ({ namespace: 'shop', pod, container: 'app', follow: true });

/** Settles to the error a read rejected with, or undefined when it resolved. */
const outcome = (read: Promise<void>): Promise<unknown> =>
  read.then(
    () => undefined,
    (err: unknown) => err,
  );

/** A line, then the stream held open (a followed log of a quiet container). */
const lineThenQuiet: Handler = (req, res) => {
  res.writeHead(200, { 'content-type': 'text/plain' });
  res.write(`2026-12-05T00:00:00Z ${new URL(req.url, 'https://x').pathname}\n`);
};

function reader(kube: KubeConfig, sessions = {}, budget = new TurnBudget()): PodLogHttp {
  const logs = new PodLogHttp(kube, budget, { sessions });
  cleanups.push(() => {
    logs.close();
  });
  return logs;
}

/** Opens `n` follow reads; resolves once each has its first chunk. */
async function openFollows(logs: PodLogHttp, n: number) {
  const controllers = Array.from({ length: n }, () => new AbortController());
  const firsts: Promise<string>[] = [];
  const reads = controllers.map((controller, i) => {
    let first: (line: string) => void = () => undefined;
    firsts.push(
      new Promise<string>((resolve) => {
        first = resolve;
      }),
    );
    return outcome(
      logs.read(follow(`web-${String(i)}`), controller.signal, (chunk) => {
        first(chunk.toString('utf8'));
      }),
    );
  });
  return { lines: await Promise.all(firsts), controllers, reads };
}

describe('PodLogHttp over HTTP/2', () => {
  it('carries many follow streams on one TLS connection, with the request of HTTP/1.1', async () => {
    const STREAMS = 20;
    let seen: Http2ServerRequest | undefined;
    const server = await startH2Server((req, res) => {
      seen = req;
      lineThenQuiet(req, res);
    });
    const logs = reader(server.kube);
    const { lines, controllers, reads } = await openFollows(logs, STREAMS);
    expect(lines).toEqual(
      Array.from(
        { length: STREAMS },
        (_, i) => `2026-12-05T00:00:00Z /api/v1/namespaces/shop/pods/web-${String(i)}/log\n`,
      ),
    );
    expect(server.connections()).toBe(1);
    expect(server.sessions).toHaveLength(1);
    expect(server.versions).toEqual(Array(STREAMS).fill('2.0'));
    expect(seen?.headers.authorization).toBe('Bearer token-0123456789');
    expect(seen?.headers['user-agent']).toMatch(/^kubexa-agent\/\S+ \(collector; pod-logs\)$/);
    expect(new URL(seen?.url ?? '', 'https://x').searchParams.get('follow')).toBe('true');
    for (const controller of controllers) controller.abort();
    expect(await Promise.all(reads)).toEqual(Array(STREAMS).fill(undefined));
  });

  it("opens another session when one carries the server's limit of streams, and serves them all", async () => {
    const server = await startH2Server(lineThenQuiet, { maxConcurrentStreams: 2 });
    const logs = reader(server.kube);
    const { lines, controllers } = await openFollows(logs, 5);
    expect(lines).toHaveLength(5);
    expect(server.sessions).toHaveLength(3);
    expect(server.connections()).toBe(3);
    for (const controller of controllers) controller.abort();
  });

  it('refuses with the status and the Status message, and resolves a body the server ended', async () => {
    const server = await startH2Server((req, res) => {
      if (req.url.includes('web-0')) {
        res.writeHead(403, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({ kind: 'Status', code: 403, message: 'pods "web-0" is forbidden' }),
        );
        return;
      }
      res.writeHead(200);
      res.end('2026-12-05T00:00:00Z the whole log\n');
    });
    const logs = reader(server.kube);
    const forbidden = await outcome(
      logs.read(follow('web-0'), new AbortController().signal, () => 0),
    );
    expect(forbidden).toBeInstanceOf(PodLogRequestError);
    expect((forbidden as PodLogRequestError).statusCode).toBe(403);
    expect((forbidden as Error).message).toBe(
      'pods/log answered HTTP 403: pods "web-0" is forbidden',
    );
    const chunks: string[] = [];
    await expect(
      logs.read(follow('web-1'), new AbortController().signal, (c) => chunks.push(c.toString())),
    ).resolves.toBeUndefined();
    expect(chunks.join('')).toBe('2026-12-05T00:00:00Z the whole log\n');
  });

  it('rejects a stream the server resets, and one whose session the server ends (GOAWAY); later reads use a new session', async () => {
    const server = await startH2Server(lineThenQuiet);
    const logs = reader(server.kube);
    const reset = new Promise<unknown>((resolve) => {
      void outcome(
        logs.read(follow('reset'), new AbortController().signal, () => {
          const [session] = server.sessions;
          // The server's side of this (the only) stream: reset with INTERNAL_ERROR.
          for (const stream of streamsOf(session))
            stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR);
        }),
      ).then(resolve);
    });
    expect(((await reset) as Error).message).toBe('log stream cut before its end');

    // GOAWAY (graceful: the open stream may finish) and then the stream cut: the read rejects,
    // and the next read opens a new session instead of a stream on the one going away.
    const first = server.sessions[0];
    let goneAway: (err: unknown) => void = () => undefined;
    const cut = new Promise<unknown>((resolve) => {
      goneAway = resolve;
    });
    void outcome(
      logs.read(follow('goaway'), new AbortController().signal, () => {
        first?.goaway(http2.constants.NGHTTP2_NO_ERROR);
      }),
    ).then((err) => {
      goneAway(err);
    });
    await until(() => first?.closed === true, 'the GOAWAY to be sent');
    const after = await openFollows(logs, 1);
    expect(after.lines).toEqual(['2026-12-05T00:00:00Z /api/v1/namespaces/shop/pods/web-0/log\n']);
    expect(server.sessions).toHaveLength(2);
    first?.destroy();
    expect(((await cut) as Error).message).toBe('log stream cut before its end');
    after.controllers[0]?.abort();
  });

  it('cancels the stream at once on abort (the server sees it closed) and hands over no chunk after it, even one queued', async () => {
    const closedWith: number[] = [];
    const server = await startH2Server((_req, res) => {
      res.writeHead(200);
      // More than a turn takes at once (the stream's window, 16 KiB frames), and then quiet.
      res.write(Buffer.alloc(4 * 1024 * 1024, 'a\n'));
      res.stream.once('close', () => closedWith.push(res.stream.rstCode));
    });
    // Each chunk costs 20 ms of a 10 ms turn (a fake clock), and two streams share the budget:
    // a chunk of one that arrives in the turn of the other's waits in the queue.
    let clock = 0;
    const budget = new TurnBudget(10, () => clock);
    const logs = reader(server.kube, {}, budget);
    const controllers = [new AbortController(), new AbortController()];
    let afterAbort = 0;
    let handed = 0;
    await Promise.all(
      controllers.map((controller, i) =>
        logs.read(follow(`web-${String(i)}`), controller.signal, () => {
          if (controller.signal.aborted) afterAbort++;
          clock += 20;
          // Aborted while chunks wait in the queue: one would be handed over if nothing
          // stopped it.
          if (++handed >= 3 && budget.waiting > 0) for (const c of controllers) c.abort();
        }),
      ),
    );
    for (let i = 0; i < 20; i++) await new Promise<void>((resolve) => setImmediate(resolve));
    await until(() => closedWith.length === 2, 'the server to see both streams closed');
    expect(closedWith).toEqual([http2.constants.NGHTTP2_CANCEL, http2.constants.NGHTTP2_CANCEL]);
    expect(afterAbort).toBe(0);
    // The session stays: a cancelled stream is not a broken connection.
    const next = await openFollows(logs, 1);
    expect(next.lines).toHaveLength(1);
    expect(server.sessions).toHaveLength(1);
    next.controllers[0]?.abort();
  });

  it('ends the stream, not the session nor the process, when the consumer throws', async () => {
    const server = await startH2Server(lineThenQuiet);
    const logs = reader(server.kube);
    const failure = await outcome(
      logs.read(follow('web-0'), new AbortController().signal, () => {
        throw new Error('consumer failed');
      }),
    );
    expect((failure as Error).message).toBe('consumer failed');
    const next = await openFollows(logs, 1);
    expect(next.lines).toHaveLength(1);
    expect(server.sessions).toHaveLength(1);
    next.controllers[0]?.abort();
  });

  it('closes a session without streams after its idle time, and every session on close()', async () => {
    const server = await startH2Server(lineThenQuiet);
    const logs = reader(server.kube, { idleMs: 50 });
    const first = await openFollows(logs, 1);
    first.controllers[0]?.abort();
    await once(server.sessions[0]!, 'close');
    expect(server.sessions).toHaveLength(1);
    // A stream open when close() is called runs on: a chunk written after it still arrives.
    const chunks: string[] = [];
    const open = new AbortController();
    const read = outcome(
      logs.read(follow('web-1'), open.signal, (c) => {
        chunks.push(c.toString());
      }),
    );
    await until(() => chunks.length === 1, 'the first line');
    expect(server.sessions).toHaveLength(2);
    const session = server.sessions[1]!;
    logs.close();
    streamsOf(session)[0]?.write('2026-12-05T00:00:01Z after close()\n');
    await until(() => chunks.length === 2, 'the line written after close()');
    expect(chunks[1]).toBe('2026-12-05T00:00:01Z after close()\n');
    // Its end closes the session (close() sent GOAWAY: no new stream on it).
    streamsOf(session)[0]?.end();
    expect(await read).toBeUndefined();
    await once(session, 'close');
  });

  it('ends a read at once on abort while its connection is still being made', async () => {
    // Accepts TCP and never answers the TLS handshake (a server or path that hangs).
    const held: Socket[] = [];
    const silent = createTcpServer((socket) => held.push(socket));
    silent.listen(0, '127.0.0.1');
    await once(silent, 'listening');
    cleanups.push(async () => {
      for (const socket of held) socket.destroy();
      silent.close();
      await once(silent, 'close');
    });
    const logs = reader(kubeConfigFor((silent.address() as AddressInfo).port));
    const controller = new AbortController();
    const read = outcome(logs.read(follow('web-0'), controller.signal, () => 0));
    await until(() => held.length === 1, 'the connection');
    controller.abort();
    expect(await read).toBeUndefined();
  });

  it("fails a read whose session never gets the server's settings, and closes its connection", async () => {
    // Finishes TLS with ALPN h2, then says nothing (a server or a path silent after the
    // handshake): without a deadline every read of the pool waited on this session for ever.
    const held: TLSSocket[] = [];
    const silent = createTlsServer(
      { cert: TLS_FIXTURES.cert, key: TLS_FIXTURES.key, ALPNProtocols: ['h2'] },
      (socket) => {
        held.push(socket);
        // Read (and drop) what comes, so the client's close is seen.
        socket.resume();
      },
    );
    const port = await listen(silent);
    cleanups.push(async () => {
      for (const socket of held) socket.destroy();
      silent.close();
      await once(silent, 'close');
    });
    const logs = reader(kubeConfigFor(port), { connectTimeoutMs: 300 });
    const err = await outcome(logs.read(follow('web-0'), new AbortController().signal, () => 0));
    expect(String(err)).toMatch(/not ready within 300 ms/);
    const [socket] = held;
    if (socket === undefined) throw new Error('no connection');
    // The client gave it up: the server's end closes.
    if (!socket.destroyed) await once(socket, 'close');
  });

  it('fails a read on a server that allows no stream, without a connection after another', async () => {
    const server = await startH2Server(lineThenQuiet, { maxConcurrentStreams: 0 });
    const logs = reader(server.kube);
    const err = await outcome(logs.read(follow('web-0'), new AbortController().signal, () => 0));
    expect(String(err)).toMatch(/SETTINGS_MAX_CONCURRENT_STREAMS 0/);
    expect(server.connections()).toBe(1);
  });

  it('reads a server that does not speak HTTP/2 over HTTP/1.1, and says so once', async () => {
    const versions: string[] = [];
    const server = createHttpsServer(
      { cert: TLS_FIXTURES.cert, key: TLS_FIXTURES.key },
      (req, res) => {
        versions.push(req.httpVersion);
        res.writeHead(200);
        res.end('2026-12-05T00:00:00Z over HTTP/1.1\n');
      },
    );
    const port = await listen(server);
    cleanups.push(async () => {
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
    });
    const told: string[] = [];
    const logs = reader(kubeConfigFor(port), { onFallback: (reason: string) => told.push(reason) });
    for (let i = 0; i < 3; i++) {
      const chunks: string[] = [];
      await logs.read(follow('web-0'), new AbortController().signal, (c) =>
        chunks.push(c.toString()),
      );
      expect(chunks.join('')).toBe('2026-12-05T00:00:00Z over HTTP/1.1\n');
    }
    expect(versions).toEqual(['1.1', '1.1', '1.1']);
    expect(told).toHaveLength(1);
    expect(told[0]).toContain('did not choose HTTP/2');
  });
});
