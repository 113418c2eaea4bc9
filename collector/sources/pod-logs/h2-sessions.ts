// HTTP/2 sessions to the API server for the log reads of one TLS material: many follow streams
// on one TLS connection, as client-go multiplexes them (each HTTP/1.1 stream was a connection of
// its own: about 100 KB of TLS buffers and HTTP parser each, in the C heap).
//
// A session takes streams while it has fewer open than min(the server's
// SETTINGS_MAX_CONCURRENT_STREAMS, MAX_STREAMS_PER_SESSION); otherwise a new one is opened (a
// client that submits more than the server allows has nghttp2 queue the request, and a queued
// follow stream would wait for ever). A session that sends GOAWAY, fails or closes leaves the pool
// at once: its streams end as the server ends them (an error for the reader, which reopens from
// its position). One with no stream left is closed after IDLE_SESSION_MS and never holds the
// process open while idle.
//
// A half-open connection (dropped without a FIN or RST) carries every stream of its session: the
// reader's idle watchdog aborts one stream, and its next read would land on the same dead
// session. So every stream we cancel has the session pinged; reads wait for the answer, and a
// session that does not answer within PING_TIMEOUT_MS is destroyed (client-go pings a session
// that read nothing for 30 s and gives it 15 s).
//
// The TLS connection is made here and offers h2 and http/1.1 (ALPN): a server that does not
// choose h2 gets no HTTP/2 preface; the pool says so once and reads for this material go over
// HTTP/1.1 (`'http/1.1'` from acquire()).
import http2, { type ClientHttp2Session } from 'node:http2';
import { isIP } from 'node:net';
import tls from 'node:tls';
import { tlsAgentOptions, type TlsMaterial } from '../../../shared/tls-context.js';

/** Our cap of streams per session, below any server's setting (the API server's is 100-1000). */
export const MAX_STREAMS_PER_SESSION = 100;
/** A session with no stream is closed after this long. */
export const IDLE_SESSION_MS = 30_000;
/**
 * A session not ready within this (the TLS handshake done and the server's HTTP/2 SETTINGS
 * received) is destroyed: its reads reject and are retried with the reader's backoff. A server
 * or a path that finishes TLS and then goes silent would otherwise hold every read of the pool.
 */
export const CONNECT_TIMEOUT_MS = 30_000;
/** Sessions one acquire() opens at most before it gives up (each left the pool at once). */
const MAX_SESSIONS_PER_ACQUIRE = 3;
/** A session pinged after a cancelled stream that does not answer within this is destroyed. */
export const PING_TIMEOUT_MS = 10_000;
/**
 * Flow-control windows we announce: per stream, and for the whole session. A paused stream (the
 * turn budget's queue) holds at most its window at the server; the default 64 KiB session window
 * would make every stream of the session wait for the slowest reader's consumption.
 */
const STREAM_WINDOW_BYTES = 256 * 1024;
const SESSION_WINDOW_BYTES = 8 * 1024 * 1024;

export interface SessionPoolOptions {
  readonly maxStreamsPerSession?: number;
  readonly idleMs?: number;
  readonly pingTimeoutMs?: number;
  /** How long a new session may take to be ready (CONNECT_TIMEOUT_MS). */
  readonly connectTimeoutMs?: number;
  /** Told once when the server does not speak HTTP/2 and reads fall back to HTTP/1.1. */
  readonly onFallback?: (reason: string) => void;
}

/** A stream's hold on a session, given back once with release(). */
export interface SessionLease {
  readonly session: ClientHttp2Session;
  /** `cancelled`: we closed the stream before its end (abort): the session is checked. */
  release(cancelled: boolean): void;
}

class PooledSession {
  /** Streams open and reserved on it. */
  active = 0;
  /** Streams it may carry: our cap until the server's settings arrive, then the lower of both. */
  limit: number;
  gone = false;
  session: ClientHttp2Session | undefined;
  /** Resolves once the session has the server's settings, or with 'http/1.1'. */
  readonly ready: Promise<'h2' | 'http/1.1'>;
  /** A ping in flight after a cancelled stream: new streams wait for it. */
  check: Promise<void> | undefined;
  idleTimer: NodeJS.Timeout | undefined;

  readonly pool: SessionPool;

  constructor(pool: SessionPool, cap: number) {
    this.pool = pool;
    this.limit = cap;
    this.ready = this.#open();
  }

  #open(): Promise<'h2' | 'http/1.1'> {
    const { origin, material } = this.pool;
    const host = origin.hostname.replace(/^\[|\]$/g, '');
    const port = Number(origin.port === '' ? 443 : origin.port);
    return new Promise((resolve, reject) => {
      const socket = tls.connect({
        ...tlsAgentOptions(material),
        host,
        port,
        // As https.Agent: SNI and the name checked are the host unless the kubeconfig names one.
        ...(material.servername === undefined && isIP(host) === 0 ? { servername: host } : {}),
        ALPNProtocols: ['h2', 'http/1.1'],
      });
      // A SYN, a handshake or the server's SETTINGS left unanswered: the OS would wait minutes
      // (a dropped path), or for ever (a server silent after TLS).
      const deadline = setTimeout(() => {
        const err = new Error(
          `HTTP/2 session to the API server not ready within ${String(this.pool.connectTimeoutMs)} ms`,
        );
        if (this.session === undefined) socket.destroy(err);
        else this.session.destroy(err);
      }, this.pool.connectTimeoutMs);
      deadline.unref();
      const settle = <T>(done: (value: T) => void, value: T): void => {
        clearTimeout(deadline);
        done(value);
      };
      const failed = (err: Error): void => {
        this.leave();
        settle(reject, err);
      };
      socket.once('error', failed);
      socket.once('secureConnect', () => {
        socket.off('error', failed);
        if (socket.alpnProtocol !== 'h2') {
          socket.destroy();
          this.leave();
          settle(resolve, 'http/1.1');
          return;
        }
        const session = http2.connect(origin, {
          createConnection: () => socket,
          settings: { enablePush: false, initialWindowSize: STREAM_WINDOW_BYTES },
        });
        this.session = session;
        session.once('goaway', () => {
          this.leave();
        });
        session.once('close', () => {
          this.leave();
          settle(reject, new Error('HTTP/2 session to the API server closed before its settings'));
        });
        session.once('error', (err: Error) => {
          this.leave();
          settle(reject, err);
        });
        // Errors after the first are the streams' to report.
        session.on('error', () => undefined);
        session.once('remoteSettings', (settings: http2.Settings) => {
          const allowed = settings.maxConcurrentStreams ?? this.limit;
          if (allowed < 1) {
            // A server that takes no stream (one draining, a proxy): not a session to wait on or
            // to open again at once; the read fails and is retried with the reader's backoff.
            this.leave();
            session.close();
            settle(
              reject,
              new Error(
                'the API server allows no stream on a new HTTP/2 session (SETTINGS_MAX_CONCURRENT_STREAMS 0)',
              ),
            );
            return;
          }
          this.limit = Math.min(this.limit, allowed);
          session.setLocalWindowSize(SESSION_WINDOW_BYTES);
          settle(resolve, 'h2');
        });
      });
    });
  }

  /** Leaves the pool (and never takes a stream again); the session ends as its server ends it. */
  leave(): void {
    if (this.gone) return;
    this.gone = true;
    clearTimeout(this.idleTimer);
    this.pool.forget(this);
  }

  /** Pings the session; one that does not answer in time is destroyed with its streams. */
  ping(timeoutMs: number): Promise<void> {
    const session = this.session;
    if (this.check !== undefined || session === undefined || this.gone) {
      return this.check ?? Promise.resolve();
    }
    const check = new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        this.leave();
        session.destroy(new Error('HTTP/2 session to the API server did not answer a ping'));
        resolve();
      }, timeoutMs);
      timer.unref();
      const answered = (err: Error | null): void => {
        clearTimeout(timer);
        if (err !== null) {
          this.leave();
          session.destroy();
        }
        resolve();
      };
      try {
        if (!session.ping(answered)) answered(new Error('ping not sent'));
      } catch (err: unknown) {
        answered(err instanceof Error ? err : new Error(String(err)));
      }
    });
    this.check = check.finally(() => {
      this.check = undefined;
    });
    return this.check;
  }

  /**
   * The session, if the stream reserved on it can go: not when it left the pool or is closing or
   * destroyed (a GOAWAY or an error Node saw first: it leaves, so the next pick opens another),
   * nor when the server's settings allow fewer streams than were reserved.
   */
  usable(): ClientHttp2Session | undefined {
    const session = this.session;
    if (session === undefined || this.gone) return undefined;
    if (session.closed || session.destroyed) {
      this.leave();
      return undefined;
    }
    return this.active > this.limit ? undefined : session;
  }

  taken(): void {
    this.active++;
    clearTimeout(this.idleTimer);
    this.idleTimer = undefined;
    // Open streams hold the process as an HTTP/1.1 request's socket does.
    this.session?.ref();
  }

  released(): void {
    this.active--;
    const session = this.session;
    if (this.active > 0 || session === undefined) return;
    // Out of the pool (closed, GOAWAY, failed): nothing will take a stream on it again.
    if (this.gone) {
      session.close();
      return;
    }
    session.unref();
    this.idleTimer = setTimeout(() => {
      if (this.active > 0) return;
      this.leave();
      session.close();
    }, this.pool.idleMs);
    this.idleTimer.unref();
  }

  closeGracefully(): void {
    this.leave();
    // No new stream; the open ones run until they end, then the session closes.
    this.session?.close();
  }
}

export class SessionPool {
  readonly material: TlsMaterial;
  readonly origin: URL;
  readonly idleMs: number;
  readonly connectTimeoutMs: number;
  readonly #cap: number;
  readonly #pingTimeoutMs: number;
  readonly #onFallback: (reason: string) => void;
  readonly #sessions = new Set<PooledSession>();
  /** Set once the server chose another protocol than h2: reads go over HTTP/1.1. */
  #http1 = false;

  constructor(material: TlsMaterial, origin: URL, options: SessionPoolOptions = {}) {
    this.material = material;
    this.origin = new URL(origin.origin);
    this.idleMs = options.idleMs ?? IDLE_SESSION_MS;
    this.#cap = options.maxStreamsPerSession ?? MAX_STREAMS_PER_SESSION;
    this.#pingTimeoutMs = options.pingTimeoutMs ?? PING_TIMEOUT_MS;
    this.connectTimeoutMs = options.connectTimeoutMs ?? CONNECT_TIMEOUT_MS;
    this.#onFallback = options.onFallback ?? (() => undefined);
  }

  /** Sessions in the pool (connecting or open). */
  get size(): number {
    return this.#sessions.size;
  }

  forget(session: PooledSession): void {
    this.#sessions.delete(session);
  }

  /** The first session with room for a stream, or a new one. */
  #pick(): PooledSession {
    for (const candidate of this.#sessions) {
      if (candidate.session?.closed === true || candidate.session?.destroyed === true) {
        candidate.leave();
      } else if (candidate.active < candidate.limit) return candidate;
    }
    const opened = new PooledSession(this, this.#cap);
    this.#sessions.add(opened);
    return opened;
  }

  /** The server chose HTTP/1.1: every later read of this pool uses it; told once. */
  #fallBack(): 'http/1.1' {
    if (this.#http1) return 'http/1.1';
    this.#http1 = true;
    this.#onFallback(
      `the API server at ${this.origin.host} did not choose HTTP/2 (ALPN): log reads use one HTTP/1.1 connection each`,
    );
    return 'http/1.1';
  }

  /** A session with room for one more stream (reserved for the caller), or 'http/1.1'. */
  async acquire(): Promise<SessionLease | 'http/1.1'> {
    for (let attempt = 1; ; attempt++) {
      if (this.#http1) return 'http/1.1';
      if (attempt > MAX_SESSIONS_PER_ACQUIRE) {
        // Each session it took left at once (a GOAWAY as soon as opened, a lower limit): the
        // read fails and its backoff applies, instead of a connection after another.
        throw new Error(
          `no HTTP/2 session to the API server took a stream in ${String(MAX_SESSIONS_PER_ACQUIRE)} tries`,
        );
      }
      const chosen = this.#pick();
      chosen.taken();
      let protocol: 'h2' | 'http/1.1';
      try {
        protocol = await chosen.ready;
        await chosen.check;
      } catch (err: unknown) {
        chosen.released();
        throw err;
      }
      if (protocol === 'http/1.1') {
        chosen.released();
        return this.#fallBack();
      }
      const session = chosen.usable();
      if (session === undefined) {
        chosen.released();
        continue;
      }
      const held = chosen;
      let released = false;
      return {
        session,
        release: (cancelled) => {
          if (released) return;
          released = true;
          held.released();
          if (cancelled) void held.ping(this.#pingTimeoutMs);
        },
      };
    }
  }

  /** Closes every session gracefully: streams open run until they end. */
  close(): void {
    for (const session of [...this.#sessions]) session.closeGracefully();
  }
}
