// The executor's only entry: a gRPC server on a Unix socket shared inside the Pod. It has no
// network listener, and answers from its own configuration, never from what the caller claims.
// The listener is ours (node:net), so the executor bounds connections before gRPC sees a byte;
// gRPC bounds message size, streams per connection, idle time and session memory.
import { dirname } from 'node:path';
import { createServer, type Socket } from 'node:net';
import {
  Server,
  ServerCredentials,
  ServerInterceptingCall,
  status as GrpcStatus,
  type sendUnaryData,
  type ServerInterceptor,
  type ServerUnaryCall,
} from '@grpc/grpc-js';
import type { Logger } from 'pino';
import {
  ExecutorServiceService,
  RefusalCode,
  type AuthorizeCommandRequest,
  type AuthorizeCommandResponse,
  type ExecutorServiceServer,
  type Gate,
  type GateAccess,
  type GetCapabilitiesRequest,
  type GetCapabilitiesResponse,
} from '../../proto/index.js';
import { nodeJobHandlers } from './node-job-handlers.js';
import type { NodeJobService } from '../jobs/node-job-service.js';
import type { MutationService } from '../mutations/mutation-service.js';
import type { Service } from '../../shared/lifecycle/service.js';
import { AGENT_VERSION } from '../../shared/version.js';
import type { AuthorizationRefusalCode, CommandGuard } from '../guard/authorize-command.js';
import { handleConsoleStream, refuseConsoleStream, type ConsoleRpcDeps } from './console-rpc.js';
import { claimSocketDir, clearSocketPath, openSocketDir } from './socket-dir.js';

export interface SocketLimits {
  /** Largest message either way; larger ones end the call with RESOURCE_EXHAUSTED. */
  readonly maxMessageBytes: number;
  /** Connections open at once; more are closed on accept. */
  readonly maxConnections: number;
  /** Concurrent streams per connection (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS). */
  readonly maxConcurrentStreams: number;
  /** A connection with no call in flight for this long is closed. */
  readonly idleTimeoutMs: number;
  /** A connection that sends nothing for this long after accept is closed. */
  readonly firstByteTimeoutMs: number;
  /** HTTP/2 session memory per connection, in MB (Node's maxSessionMemory). */
  readonly maxSessionMemoryMb: number;
}

export const DEFAULT_SOCKET_LIMITS: SocketLimits = {
  maxMessageBytes: 64 * 1024,
  maxConnections: 8,
  maxConcurrentStreams: 16,
  idleTimeoutMs: 5 * 60_000,
  firstByteTimeoutMs: 10_000,
  maxSessionMemoryMb: 2,
};

export interface ExecutorServerOptions {
  /**
   * Path of the Unix socket. Its directory is the executor's own: created 0700, refused when it
   * belongs to another user, opened to socketGroup (0750) once the socket is 0660.
   */
  readonly socketPath: string;
  /**
   * The executor process's numeric uid: the socket directory must belong to it. A number from
   * main.ts, since a container may run a uid that /etc/passwd does not name.
   */
  readonly ownUid: number;
  /** The group that may connect (the Pod's fsGroup, which the collector has); absent: owner only. */
  readonly socketGroup?: number;
  /** Gates switched on in the executor's own configuration. */
  readonly enabledGates: readonly Gate[];
  /** The one place that authorizes a privileged request. */
  readonly guard: CommandGuard;
  /** The executor's own access reviews per gate, for the catalog; absent: none reported. */
  readonly gateAccess?: () => Promise<GateAccess[]>;
  /** How long close() waits for calls in flight before forcing the server down. */
  readonly shutdownTimeoutMs: number;
  readonly limits?: Partial<SocketLimits>;
  /** Node jobs and mutations; absent: every such request is refused (GATE_DISABLED). */
  readonly nodeJobs?: NodeJobService;
  readonly mutations?: MutationService;
  /** Consoles (console-rpc.ts); absent: every console stream is refused as GATE_DISABLED. */
  readonly consoles?: ConsoleRpcDeps | undefined;
}

export interface ExecutorServerDeps {
  readonly logger: Logger;
}

/** Log fields from the caller are capped, so a hostile client cannot flood the log. */
const MAX_LOG_FIELD = 256;
const cap = (value: string) =>
  value.length > MAX_LOG_FIELD ? `${value.slice(0, MAX_LOG_FIELD)}…[${value.length}]` : value;

const REFUSAL_CODES: Record<AuthorizationRefusalCode, RefusalCode> = {
  SIGNATURE_INVALID: RefusalCode.REFUSAL_CODE_SIGNATURE_INVALID,
  SIGNATURE_EXPIRED: RefusalCode.REFUSAL_CODE_SIGNATURE_EXPIRED,
  SIGNATURE_REPLAYED: RefusalCode.REFUSAL_CODE_SIGNATURE_REPLAYED,
  SIGNATURE_MISMATCH: RefusalCode.REFUSAL_CODE_SIGNATURE_MISMATCH,
  LIMIT_REACHED: RefusalCode.REFUSAL_CODE_LIMIT_REACHED,
  INVALID_REQUEST: RefusalCode.REFUSAL_CODE_INVALID_REQUEST,
  GATE_DISABLED: RefusalCode.REFUSAL_CODE_GATE_DISABLED,
};

export function createExecutorServer(
  options: ExecutorServerOptions,
  deps: ExecutorServerDeps,
): Service {
  const logger = deps.logger.child({ component: 'executor-server' });
  const limits: SocketLimits = { ...DEFAULT_SOCKET_LIMITS, ...options.limits };

  // Every call ends in exactly one log line at info: method, decision, status and reason. A call
  // the transport ends before the handler answers (a message above the size limit, a
  // cancellation, a dropped connection) never reaches sendStatus here, so onCancel logs it.
  const logEveryCall: ServerInterceptor = (descriptor, call) => {
    let logged = false;
    const log = (fields: Record<string, unknown>) => {
      if (logged) return;
      logged = true;
      logger.info({ method: cap(descriptor.path), ...fields }, 'executor call');
    };
    return new ServerInterceptingCall(call, {
      start(next) {
        next({
          onCancel() {
            log({
              decision: 'failed',
              status: 'ENDED_BY_TRANSPORT',
              reason: `ended before an answer: cancelled, connection lost, or a message above ${limits.maxMessageBytes} bytes`,
            });
          },
        });
      },
      sendStatus(status, next) {
        log({
          decision: status.code === GrpcStatus.OK ? 'answered' : 'failed',
          status: GrpcStatus[status.code],
          reason: cap(status.details),
        });
        next(status);
      },
    });
  };

  const server = new Server({
    'grpc.max_receive_message_length': limits.maxMessageBytes,
    'grpc.max_send_message_length': limits.maxMessageBytes,
    'grpc.max_concurrent_streams': limits.maxConcurrentStreams,
    'grpc.max_connection_idle_ms': limits.idleTimeoutMs,
    'grpc-node.max_session_memory': limits.maxSessionMemoryMb,
    interceptors: [logEveryCall],
  });
  const implementation: ExecutorServiceServer = {
    getCapabilities(
      call: ServerUnaryCall<GetCapabilitiesRequest, GetCapabilitiesResponse>,
      callback: sendUnaryData<GetCapabilitiesResponse>,
    ) {
      logger.debug({ requestId: cap(call.request.requestId) }, 'capabilities requested');
      const answer = (gateAccess: GateAccess[]) => {
        callback(null, {
          executorVersion: AGENT_VERSION,
          enabledGates: [...options.enabledGates],
          gateAccess,
        });
      };
      if (options.gateAccess === undefined) {
        answer([]);
        return;
      }
      options.gateAccess().then(answer, (err: unknown) => {
        logger.warn({ err }, 'gate access reviews failed');
        answer([]);
      });
    },
    authorizeCommand(
      call: ServerUnaryCall<AuthorizeCommandRequest, AuthorizeCommandResponse>,
      callback: sendUnaryData<AuthorizeCommandResponse>,
    ) {
      const request = call.request;
      const target = request.target ?? {
        kind: '',
        namespace: '',
        name: '',
        container: '',
        resource: '',
      };
      const decision = options.guard.authorize(request.command?.jws ?? '', {
        requestId: request.requestId,
        permission: request.permission,
        target,
        verb: request.verb,
      });
      // The audit record: who (verified), what, on what, and the decision with its reason.
      const audit = {
        method: 'AuthorizeCommand',
        requestId: cap(request.requestId),
        verb: cap(request.verb),
        target: cap(`${target.kind}/${target.namespace}/${target.name}`),
      };
      if (decision.accepted) {
        logger.info(
          {
            ...audit,
            decision: 'accepted',
            principal: cap(decision.principal),
            gate: decision.gate,
          },
          'privileged request authorized',
        );
        callback(null, { accepted: true, principal: decision.principal });
      } else {
        logger.info(
          {
            ...audit,
            decision: 'refused',
            code: decision.code,
            reason: cap(decision.reason),
            principal: cap(decision.principal),
          },
          'privileged request refused',
        );
        callback(null, {
          accepted: false,
          principal: decision.principal,
          refusal: { code: REFUSAL_CODES[decision.code], reason: decision.reason.slice(0, 512) },
        });
      }
    },
    ...nodeJobHandlers(options),
    console(call) {
      if (options.consoles === undefined) refuseConsoleStream(call);
      else handleConsoleStream(call, options.consoles, options.guard);
    },
  };
  server.addService(ExecutorServiceService, implementation);
  const injector = server.createConnectionInjector(ServerCredentials.createInsecure());

  const sockets = new Set<Socket>();
  const listener = createServer({ pauseOnConnect: false }, (socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
    injector.injectConnection(socket);
    // A connection that never speaks is closed; once it does, gRPC's idle timer takes over.
    // (Set after the injection: the HTTP/2 server resets the socket's timeout when it adopts it.)
    // The HTTP/2 session reads the socket's handle directly, so 'data' never fires here: whether
    // the peer spoke is socket.bytesRead when the timer fires.
    socket.setTimeout(limits.firstByteTimeoutMs, () => {
      if (socket.bytesRead > 0) {
        socket.setTimeout(0);
        return;
      }
      logger.info(
        { decision: 'refused', reason: 'no bytes before the first-byte timeout' },
        'executor connection closed',
      );
      socket.destroy();
    });
  });
  listener.maxConnections = limits.maxConnections;
  listener.on('drop', () => {
    logger.info(
      { decision: 'refused', reason: `more than ${limits.maxConnections} connections` },
      'executor connection refused',
    );
  });

  let closing: Promise<void> | undefined;

  return {
    name: 'executor-server',
    async start() {
      const dir = dirname(options.socketPath);
      await claimSocketDir(dir, options.ownUid);
      await clearSocketPath(options.socketPath);
      await new Promise<void>((resolve, reject) => {
        listener.once('error', reject);
        listener.listen(options.socketPath, () => {
          listener.off('error', reject);
          resolve();
        });
      });
      await openSocketDir(dir, options.socketPath, options.socketGroup);
      logger.info(
        { socketPath: options.socketPath, socketGroup: options.socketGroup ?? null, limits },
        'executor listening',
      );
    },
    close() {
      closing ??= new Promise<void>((resolve) => {
        options.consoles?.sessions.closeAll();
        // Stop accepting first; net.Server.close removes the socket file it created.
        listener.close();
        injector.drain(options.shutdownTimeoutMs);
        const force = setTimeout(() => {
          server.forceShutdown();
          injector.destroy();
          for (const socket of sockets) socket.destroy();
          resolve();
        }, options.shutdownTimeoutMs);
        force.unref();
        server.tryShutdown(() => {
          clearTimeout(force);
          injector.destroy();
          for (const socket of sockets) socket.destroy();
          resolve();
        });
      });
      return closing;
    },
  };
}
