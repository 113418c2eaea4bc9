import { createCommandSigner, type CommandSigner } from './command-signer.js';
import { ConsoleHub } from './console-hub.js';
import { NodeJobHub } from './node-job-hub.js';
import { EventEmitter } from 'node:events';
import { Server, ServerCredentials, status } from '@grpc/grpc-js';
import type { Logger } from 'pino';
import {
  AgentServiceService,
  type AgentMessage,
  type AgentServiceServer,
  type BackpressureSignal,
  type ConfigUpdate,
  type ResourceQuery,
  type ResourceQueryResult,
} from '../proto/index.js';
import { AgentConnection, type AdmissionOptions, type SessionInfo } from './agent-connection.js';
import { raiseReceiveWindows } from './http2-windows.js';
import { MessageStore } from './message-store.js';

export interface DemoGatewayOptions extends AdmissionOptions {
  /** SQLite file for received messages; ':memory:' by default. */
  readonly databasePath?: string;
  /** Closed sessions kept for the UI. */
  readonly keepClosedSessions?: number;
}

/** PEM certificate chain and key the gateway serves. */
export interface ServerTls {
  readonly cert: Buffer;
  readonly key: Buffer;
}

export interface DemoGatewayDeps {
  readonly logger: Logger;
  readonly now?: () => number;
}

/** Events: `session` (SessionInfo) on connect and close, `message` (AgentMessage, isNew). */
export interface DemoGatewayEvents {
  session: [SessionInfo];
  message: [AgentMessage, boolean, SessionInfo];
}

/** Forced shutdown after this long: agents half-close quickly, a stuck one must not hang us. */
const SHUTDOWN_GRACE_MS = 2000;

/**
 * A local stand-in for the Kubexa gateway: a real AgentService server that admits agents,
 * stores what they send and can send them anything the real gateway can. Tests drive it
 * through this API; the web UI reads it through the same.
 */
export class DemoGateway {
  readonly store: MessageStore;
  /** Signs privileged requests; its public key goes into the executor's command_keys. */
  readonly commandSigner: CommandSigner = createCommandSigner();
  readonly consoles: ConsoleHub;
  /** Node jobs and mutations, signed like console opens (node-job-hub.ts). */
  readonly nodeJobs: NodeJobHub;
  readonly events = new EventEmitter<DemoGatewayEvents>();
  readonly #options: DemoGatewayOptions;
  readonly #logger: Logger;
  readonly #now: () => number;
  // A live query's answer carries up to 8 MiB of payload (the agent's cap): above grpc's 4 MiB
  // default receive limit, so the gateway accepts twice the cap.
  readonly #server = new Server({ 'grpc.max_receive_message_length': 16 * 1024 * 1024 });
  readonly #connections = new Map<string, AgentConnection>();
  #port: number | undefined;
  #closed: Promise<void> | undefined;

  constructor(options: DemoGatewayOptions, deps: DemoGatewayDeps) {
    this.#options = options;
    this.#logger = deps.logger.child({ component: 'demo-gateway' });
    this.#now = deps.now ?? Date.now;
    this.store = new MessageStore(options.databasePath);
    this.consoles = new ConsoleHub(this.commandSigner, (sessionId, payload) => {
      const connection = this.#connections.get(sessionId);
      // An agent is sent a pod console open only if it advertised pod_consoles, a node console
      // open only with node_consoles, and a re-attach only with either.
      const advertised =
        payload.$case === 'consoleOpen'
          ? payload.value.node === ''
            ? connection?.podConsoles
            : connection?.nodeConsoles
          : connection?.podConsoles === true || connection?.nodeConsoles === true;
      return advertised === true && connection?.send(payload) === true;
    });
    this.events.on('message', (message) => {
      if (message.payload?.$case === 'auditRecord')
        this.consoles.recordAudit(message.payload.value);
    });
    this.nodeJobs = new NodeJobHub(this.commandSigner, (sessionId, payload) => {
      const connection = this.#connections.get(sessionId);
      // An agent that did not advertise node_jobs / mutations is never sent those requests.
      const advertised =
        payload.$case === 'mutationRequest' ? connection?.mutations : connection?.nodeJobs;
      return advertised === true && connection?.send(payload) === true;
    });
    this.events.on('message', (message) => {
      if (message.payload !== undefined) this.nodeJobs.onAgentMessage(message.payload);
    });
    this.events.on('message', (message, isNew, session) => {
      if (isNew) this.store.cluster.record(message, session.clusterId, this.#now());
    });
    const impl: AgentServiceServer = {
      connect: (call) => {
        // The connection lives as long as its call: the call's listeners hold it.
        new AgentConnection(call, this.#options, {
          logger: this.#logger,
          store: this.store,
          now: this.#now,
          onSession: (c) => {
            this.#connections.set(c.info.sessionId, c);
            this.events.emit('session', c.info);
          },
          onMessage: (c, message, isNew) => {
            this.events.emit('message', message, isNew, c.info);
          },
          onClosed: (c) => {
            this.#pruneClosed();
            this.events.emit('session', c.info);
          },
        });
      },
      console: (call) => {
        this.consoles.accept(call);
      },
    };
    this.#server.addService(AgentServiceService, impl);
  }

  /** Binds host:port (port 0 picks a free one), plaintext unless `tls` is given; returns the port. */
  listen(host: string, port: number, tls?: ServerTls): Promise<number> {
    const creds = tls
      ? ServerCredentials.createSsl(null, [{ cert_chain: tls.cert, private_key: tls.key }], false)
      : ServerCredentials.createInsecure();
    return new Promise<number>((resolve, reject) => {
      this.#server.bindAsync(`${host}:${port}`, creds, (err, bound) => {
        if (err) {
          reject(err);
          return;
        }
        this.#port = bound;
        if (!raiseReceiveWindows(this.#server)) {
          this.#logger.warn('HTTP/2 receive windows left at 64 KiB: agents will ship slowly');
        }
        this.#logger.info({ host, port: bound }, 'demo gateway listening');
        resolve(bound);
      });
    });
  }

  get port(): number | undefined {
    return this.#port;
  }

  /** Connected agent sessions whose agent advertised pod consoles, newest first. */
  consoleAgents(): string[] {
    return this.sessions()
      .filter((s) => s.state === 'connected' && this.#connections.get(s.sessionId)?.podConsoles)
      .map((s) => s.sessionId);
  }

  /** Connected agent sessions whose agent advertised node jobs, newest first. */
  nodeJobAgents(): string[] {
    return this.sessions()
      .filter((s) => s.state === 'connected' && this.#connections.get(s.sessionId)?.nodeJobs)
      .map((s) => s.sessionId);
  }

  /** Connected agent sessions whose agent advertised node consoles, newest first. */
  nodeConsoleAgents(): string[] {
    return this.sessions()
      .filter((s) => s.state === 'connected' && this.#connections.get(s.sessionId)?.nodeConsoles)
      .map((s) => s.sessionId);
  }

  /** Every known session, connected first, newest first. */
  sessions(): SessionInfo[] {
    return [...this.#connections.values()]
      .map((c) => c.info)
      .sort((a, b) =>
        a.state === b.state ? b.connectedAt - a.connectedAt : a.state === 'connected' ? -1 : 1,
      );
  }

  /** Resolves with the first session (existing or future) matching `predicate`. */
  waitForSession(
    predicate: (s: SessionInfo) => boolean = (s) => s.state === 'connected',
  ): Promise<SessionInfo> {
    const found = this.sessions().find(predicate);
    if (found) return Promise.resolve(found);
    return new Promise<SessionInfo>((resolve) => {
      const listener = (info: SessionInfo): void => {
        if (!predicate(info)) return;
        this.events.off('session', listener);
        resolve(info);
      };
      this.events.on('session', listener);
    });
  }

  /**
   * Resolves once the store holds at least `count` messages of `kind`. Log batches are never
   * stored under `storeLogBatches: false`: waiting for them is refused at once, not forever.
   */
  waitForStored(kind: string, count: number): Promise<void> {
    if (kind === 'logs' && this.#options.storeLogBatches === false) {
      return Promise.reject(
        new Error(
          'waitForStored("logs"): this gateway stores no log batches (storeLogBatches: false); count them from the message event',
        ),
      );
    }
    if (this.store.count(kind) >= count) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const listener = (): void => {
        if (this.store.count(kind) < count) return;
        this.events.off('message', listener);
        resolve();
      };
      this.events.on('message', listener);
    });
  }

  sendConfigUpdate(sessionId: string, update: ConfigUpdate): boolean {
    return this.#connection(sessionId).send({ $case: 'config', value: update });
  }

  sendBackpressure(sessionId: string, signal: BackpressureSignal): boolean {
    return this.#connection(sessionId).send({ $case: 'backpressure', value: signal });
  }

  sendShutdown(sessionId: string, reason: string): boolean {
    return this.#connection(sessionId).send({ $case: 'shutdown', value: { reason } });
  }

  query(sessionId: string, query: ResourceQuery): Promise<ResourceQueryResult> {
    return this.#connection(sessionId).query({ $case: 'resourceQuery', value: query });
  }

  /** With `holdAcks`: sends the held acks of a session. */
  releaseAcks(sessionId: string): number {
    return this.#connection(sessionId).releaseAcks();
  }

  /** With `holdAcks`: loses the held acks of a session, as a crashed gateway would. */
  forgetAcks(sessionId: string): number {
    return this.#connection(sessionId).forgetAcks();
  }

  /** Ends a session from the gateway side with a gRPC status. */
  kick(
    sessionId: string,
    code: status = status.UNAVAILABLE,
    details = 'kicked by the demo gateway',
  ): void {
    this.#connection(sessionId).abort(code, details);
  }

  /** Graceful, then forced after a grace period. Idempotent. */
  close(): Promise<void> {
    this.#closed ??= new Promise<void>((resolve) => {
      const force = setTimeout(() => {
        this.#server.forceShutdown();
      }, SHUTDOWN_GRACE_MS);
      force.unref();
      for (const c of this.#connections.values())
        c.abort(status.UNAVAILABLE, 'demo gateway stopping');
      this.#server.tryShutdown(() => {
        clearTimeout(force);
        this.store.close();
        resolve();
      });
    });
    return this.#closed;
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  #connection(sessionId: string): AgentConnection {
    const connection = this.#connections.get(sessionId);
    if (!connection) throw new Error(`no session ${sessionId}`);
    return connection;
  }

  #pruneClosed(): void {
    const keep = this.#options.keepClosedSessions ?? 50;
    const closed = [...this.#connections.values()].filter((c) => c.info.state === 'closed');
    for (const c of closed.slice(0, Math.max(0, closed.length - keep))) {
      this.#connections.delete(c.info.sessionId);
    }
  }
}
