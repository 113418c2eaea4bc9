// An HTTPS proxy in front of the test API server that terminates TLS (the fixture certificate),
// so it sees each request a client makes, and can hold the requests a test picks before they
// reach the API server. Its counts (requests seen, in flight now, the most in flight at once)
// are the API server's side of "at most N at once": a client's own counter could be wrong in
// the same way as the code it counts. Clients authenticate with a bearer token, passed on
// untouched (a client certificate would end at the proxy).
import { request as httpsRequest, createServer, type Server } from 'node:https';
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { readFileSync } from 'node:fs';
import { KubeConfig } from '@kubernetes/client-node';
import { TLS_FIXTURES } from './gateway-harness.js';

/** Which requests a tally counts: method and path (with its query string). */
export type RequestMatch = (method: string, path: string) => boolean;

export interface Tally {
  /** Matching requests received since the tally was made. */
  seen(): number;
  /** Matching requests received and not yet answered in full (held ones included). */
  inFlight(): number;
  /** The most matching requests in flight at once since the tally was made (or reset). */
  maxInFlight(): number;
  /** Matching requests held now, not yet sent to the API server. */
  held(): number;
  /** Hold every matching request from now on until release(). */
  hold(): void;
  /** Send every held request on, and stop holding. */
  release(): void;
  resetMax(): void;
}

export interface HoldingProxy {
  /** Counts (and can hold) the requests `match` picks; tallies are independent. */
  tally(match: RequestMatch): Tally;
  /** A KubeConfig that reaches the API server through the proxy with this bearer token. */
  kubeConfigFor(token: string): KubeConfig;
  close(): Promise<void>;
}

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'host']);

function forwardable(headers: IncomingHttpHeaders): IncomingHttpHeaders {
  return Object.fromEntries(
    Object.entries(headers).filter(([name]) => !HOP_BY_HOP.has(name.toLowerCase())),
  );
}

interface TallyState extends Tally {
  readonly match: RequestMatch;
  /** Called when a matching request arrives; resolves when it may go on. */
  admit(): Promise<void>;
  done(): void;
}

function createTally(match: RequestMatch): TallyState {
  let seen = 0;
  let inFlight = 0;
  let max = 0;
  let holding = false;
  let waiters: (() => void)[] = [];
  return {
    match,
    seen: () => seen,
    inFlight: () => inFlight,
    maxInFlight: () => max,
    held: () => waiters.length,
    hold() {
      holding = true;
    },
    release() {
      holding = false;
      const go = waiters;
      waiters = [];
      for (const resolve of go) resolve();
    },
    resetMax() {
      max = inFlight;
    },
    admit() {
      seen++;
      inFlight++;
      max = Math.max(max, inFlight);
      if (!holding) return Promise.resolve();
      return new Promise<void>((resolve) => waiters.push(resolve));
    },
    done() {
      inFlight--;
    },
  };
}

/** `admin` names the API server and its CA; its own credentials are never used. */
export async function startHoldingProxy(admin: KubeConfig): Promise<HoldingProxy> {
  const cluster = admin.getCurrentCluster();
  if (cluster === null) throw new Error('the kubeconfig has no current cluster');
  const upstream = new URL(cluster.server);
  const ca =
    cluster.caData !== undefined
      ? Buffer.from(cluster.caData, 'base64')
      : cluster.caFile !== undefined
        ? readFileSync(cluster.caFile)
        : undefined;
  const tallies: TallyState[] = [];

  const forward = (incoming: IncomingMessage, outgoing: ServerResponse) => {
    const forwarded = httpsRequest(
      {
        host: upstream.hostname,
        port: Number(upstream.port || 443),
        method: incoming.method,
        path: incoming.url ?? '/',
        headers: forwardable(incoming.headers),
        ...(ca === undefined ? { rejectUnauthorized: false } : { ca }),
      },
      (answer) => {
        outgoing.writeHead(answer.statusCode ?? 502, forwardable(answer.headers));
        answer.pipe(outgoing);
      },
    );
    forwarded.once('error', (err) => {
      outgoing.destroy(err);
    });
    incoming.pipe(forwarded);
  };

  const server: Server = createServer(
    { cert: TLS_FIXTURES.cert, key: TLS_FIXTURES.key },
    (incoming, outgoing) => {
      const method = incoming.method ?? '';
      const path = incoming.url ?? '/';
      const matching = tallies.filter((tally) => tally.match(method, path));
      // In flight until the answer is written in full, or the client gave up on it.
      let finished = false;
      const finish = (): void => {
        if (finished) return;
        finished = true;
        for (const tally of matching) tally.done();
      };
      outgoing.once('close', finish);
      // Held requests are read by nobody meanwhile: their bodies wait in the socket.
      void Promise.all(matching.map((tally) => tally.admit())).then(() => {
        if (outgoing.destroyed) return;
        forward(incoming, outgoing);
      });
    },
  );
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('proxy has no port');
  return {
    tally(match) {
      const tally = createTally(match);
      tallies.push(tally);
      return tally;
    },
    kubeConfigFor(token) {
      const kc = new KubeConfig();
      kc.loadFromOptions({
        clusters: [
          {
            name: 'held',
            server: `https://127.0.0.1:${String(address.port)}`,
            caFile: TLS_FIXTURES.caPath,
            skipTLSVerify: false,
          },
        ],
        users: [{ name: 'token', token }],
        contexts: [{ name: 'held', cluster: 'held', user: 'token' }],
        currentContext: 'held',
      });
      return kc;
    },
    async close() {
      for (const tally of tallies) tally.release();
      server.closeAllConnections();
      await new Promise<void>((resolve) => {
        server.close(() => {
          resolve();
        });
      });
    },
  };
}
