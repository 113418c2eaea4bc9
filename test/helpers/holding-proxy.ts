// An HTTPS proxy in front of the test API server that terminates TLS (the fixture certificate),
// so it sees each request a client makes, and can hold the requests a test picks before they
// reach the API server. Its counts (requests seen, in flight now, the most in flight at once)
// are the API server's side of "at most N at once": a client's own counter could be wrong in
// the same way as the code it counts. Clients authenticate with a bearer token, passed on
// untouched (a client certificate would end at the proxy).
import type { KubeConfig } from '@kubernetes/client-node';
import { createProxyServer, forwardRequest, listenProxy, upstreamOf } from './api-server-proxy.js';

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
  const upstream = upstreamOf(admin);
  const tallies: TallyState[] = [];

  const server = createProxyServer((incoming, outgoing) => {
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
      forwardRequest(upstream, incoming, outgoing);
    });
  });
  const listening = await listenProxy(server, 'held');
  return {
    tally(match) {
      const tally = createTally(match);
      tallies.push(tally);
      return tally;
    },
    kubeConfigFor: (token) => listening.kubeConfigFor(token),
    async close() {
      for (const tally of tallies) tally.release();
      await listening.close();
    },
  };
}
