// PodLogHttp against a real HTTP server on loopback (a kubeconfig may point at a plain-HTTP API
// server): the request it sends, how the body arrives, and every way a read ends. TLS and the
// real API server are covered by test/integration/pod-log-http.test.ts.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';
import { afterEach, describe, expect, it } from 'vitest';
import { FakeClock } from '../../../test/helpers/fake-clock.js';
import { logUrl, PodLogHttp, PodLogRequestError } from './pod-log-http.js';
import { TurnBudget } from './turn-budget.js';

type Handler = (request: IncomingMessage, response: ServerResponse) => void;

const servers: Server[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

async function serve(handler: Handler): Promise<string> {
  const server = createServer(handler);
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${String((server.address() as AddressInfo).port)}`;
}

function kubeConfig(server: string, kc = new KubeConfig()): KubeConfig {
  kc.loadFromOptions({
    clusters: [{ name: 'c', server, skipTLSVerify: true }],
    users: [{ name: 'u', token: 'test-token-123' }],
    contexts: [{ name: 'ctx', cluster: 'c', user: 'u' }],
    currentContext: 'ctx',
  });
  return kc;
}

const request = {
  namespace: 'shop',
  pod: 'web-0',
  container: 'app',
  follow: true,
  tailLines: 10,
  sinceTime: new Date('2026-01-02T03:04:05Z'),
  previous: true,
};

/** Settles to the error a read rejected with, or undefined when it resolved. */
const outcome = (read: Promise<void>): Promise<unknown> =>
  read.then(
    () => undefined,
    (err: unknown) => err,
  );

describe('PodLogHttp over plain HTTP', () => {
  it('sends the log request with its parameters and credentials, and hands over every chunk', async () => {
    let seen: IncomingMessage | undefined;
    // The server writes its second chunk only once the caller holds the first (or after 5 s):
    // a reader that gathered chunks and handed them over later would be seen here.
    let firstHandedOver: () => void = () => undefined;
    const handedOver = new Promise<string>((resolve) => {
      firstHandedOver = () => {
        resolve('first chunk handed over before the second was written');
      };
    });
    const server = await serve((req, res) => {
      seen = req;
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('2026-01-02T03:04:05.000000001Z a\n');
      void Promise.race([
        handedOver,
        new Promise<string>((resolve) =>
          setTimeout(() => {
            resolve('first chunk still held after 5 s');
          }, 5_000),
        ),
      ]).then((verdict) => {
        res.end(`2026-01-02T03:04:05.000000002Z ${verdict}\n`);
      });
    });
    const chunks: string[] = [];
    await new PodLogHttp(kubeConfig(server)).read(request, new AbortController().signal, (c) => {
      chunks.push(c.toString());
      firstHandedOver();
    });
    expect(chunks).toEqual([
      '2026-01-02T03:04:05.000000001Z a\n',
      '2026-01-02T03:04:05.000000002Z first chunk handed over before the second was written\n',
    ]);
    const url = new URL(seen?.url ?? '', server);
    expect(url.pathname).toBe('/api/v1/namespaces/shop/pods/web-0/log');
    expect(Object.fromEntries(url.searchParams)).toEqual({
      container: 'app',
      timestamps: 'true',
      follow: 'true',
      previous: 'true',
      tailLines: '10',
      sinceTime: '2026-01-02T03:04:05.000Z',
    });
    expect(seen?.headers.authorization).toBe('Bearer test-token-123');
    expect(seen?.headers['user-agent']).toMatch(/^kubexa-agent\/\S+ \(collector; pod-logs\)$/);
  });

  it('asks tailLines=0 for a tail of 0 (nothing before now), and no tail when there is none', () => {
    const url = (tailLines?: number) =>
      logUrl('https://api.example:6443/', {
        namespace: 'shop',
        pod: 'web-0',
        container: 'app',
        follow: true,
        ...(tailLines === undefined ? {} : { tailLines }),
      }).searchParams.get('tailLines');
    expect(url(0)).toBe('0');
    expect(url(5)).toBe('5');
    expect(url()).toBeNull();
  });

  it('refuses with the status and the API server message, the Status code winning', async () => {
    const server = await serve((req, res) => {
      const forbidden = req.url?.includes('web-0') === true;
      res.writeHead(forbidden ? 403 : 500, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify(
          forbidden
            ? { kind: 'Status', code: 403, message: 'pods "web-0" is forbidden' }
            : { kind: 'Status', code: 400, message: 'container "app" is waiting to start' },
        ),
      );
    });
    const reader = new PodLogHttp(kubeConfig(server));
    const forbidden = await outcome(reader.read(request, new AbortController().signal, () => 0));
    expect(forbidden).toBeInstanceOf(PodLogRequestError);
    expect((forbidden as PodLogRequestError).statusCode).toBe(403);
    expect((forbidden as Error).message).toBe(
      'pods/log answered HTTP 403: pods "web-0" is forbidden',
    );
    const waiting = await outcome(
      reader.read({ ...request, pod: 'web-1' }, new AbortController().signal, () => 0),
    );
    expect((waiting as PodLogRequestError).statusCode).toBe(400);
    expect((waiting as Error).message).toContain('is waiting to start');
    expect(String(forbidden)).not.toContain('test-token-123');
  });

  it('rejects a body cut before its last chunk, and resolves one the server ended', async () => {
    const server = await serve((req, res) => {
      res.writeHead(200);
      res.write('partial line\n');
      if (req.url?.includes('cut') === true) setTimeout(() => req.socket.destroy(), 20);
      else setTimeout(() => res.end(), 20);
    });
    const reader = new PodLogHttp(kubeConfig(server));
    const cut = await outcome(
      reader.read({ ...request, pod: 'cut' }, new AbortController().signal, () => 0),
    );
    expect((cut as Error).message).toBe('log stream cut before its end');
    await expect(
      reader.read({ ...request, pod: 'whole' }, new AbortController().signal, () => 0),
    ).resolves.toBeUndefined();
  });

  it('ends quietly on abort: during the body, and during a hanging authentication step', async () => {
    const server = await serve((_req, res) => {
      res.writeHead(200);
      res.write('first\n');
    });
    const during = new AbortController();
    const read = new PodLogHttp(kubeConfig(server)).read(request, during.signal, () => {
      during.abort();
    });
    await expect(read).resolves.toBeUndefined();

    // An exec plugin or token refresh that never answers.
    class HangingAuth extends KubeConfig {
      override applyToHTTPSOptions(): Promise<void> {
        return new Promise(() => undefined);
      }
    }
    const beforeRequest = new AbortController();
    const waiting = new PodLogHttp(kubeConfig(server, new HangingAuth())).read(
      request,
      beforeRequest.signal,
      () => 0,
    );
    setTimeout(() => {
      beforeRequest.abort();
    }, 20);
    await expect(waiting).resolves.toBeUndefined();
  });

  it('asks the kubeconfig for its credentials at most once a second: reads in between share them', async () => {
    // client-node reads the CA, certificate and key files at every ask, and a restart opens
    // every stream at once. A token changed in the kubeconfig is sent from the next second on.
    const authorizations: (string | undefined)[] = [];
    const server = await serve((req, res) => {
      authorizations.push(req.headers.authorization);
      res.end('2026-01-02T03:04:05.000000001Z a\n');
    });
    const kc = kubeConfig(server);
    const clock = new FakeClock();
    const reader = new PodLogHttp(kc, new TurnBudget(), { clock });
    const read = () => reader.read(request, new AbortController().signal, () => undefined);
    await read();
    kc.loadFromOptions({
      clusters: [{ name: 'c', server, skipTLSVerify: true }],
      users: [{ name: 'u', token: 'rotated-token-456' }],
      contexts: [{ name: 'ctx', cluster: 'c', user: 'u' }],
      currentContext: 'ctx',
    });
    await read();
    clock.advance(999);
    await read();
    clock.advance(1);
    await read();
    expect(authorizations).toEqual([
      'Bearer test-token-123',
      'Bearer test-token-123',
      'Bearer test-token-123',
      'Bearer rotated-token-456',
    ]);
  });

  it('ends the connection, not the process, when the consumer throws', async () => {
    const server = await serve((_req, res) => {
      res.writeHead(200);
      res.write('line\n');
    });
    const failure = await outcome(
      new PodLogHttp(kubeConfig(server)).read(request, new AbortController().signal, () => {
        throw new Error('consumer failed');
      }),
    );
    expect((failure as Error).message).toBe('consumer failed');
  });
});
