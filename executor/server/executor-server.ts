// The executor's only entry: a gRPC server on a Unix socket shared inside the Pod. It has no
// network listener, and answers from its own configuration, never from what the caller claims.
import { chmod, lstat, rm } from 'node:fs/promises';
import { Server, ServerCredentials, type sendUnaryData, type ServerUnaryCall } from '@grpc/grpc-js';
import type { Logger } from 'pino';
import {
  ExecutorServiceService,
  type ExecutorServiceServer,
  type Gate,
  type GetCapabilitiesRequest,
  type GetCapabilitiesResponse,
} from '../../proto/index.js';
import type { Service } from '../../shared/lifecycle/service.js';
import { AGENT_VERSION } from '../../shared/version.js';

export interface ExecutorServerOptions {
  /** Path of the Unix socket; a stale file from an earlier run is replaced. */
  readonly socketPath: string;
  /** Gates switched on in the executor's own configuration. */
  readonly enabledGates: readonly Gate[];
  /** How long close() waits for calls in flight before forcing the server down. */
  readonly shutdownTimeoutMs: number;
}

export interface ExecutorServerDeps {
  readonly logger: Logger;
}

export function createExecutorServer(
  options: ExecutorServerOptions,
  deps: ExecutorServerDeps,
): Service {
  const logger = deps.logger.child({ component: 'executor-server' });
  const server = new Server();
  const implementation: ExecutorServiceServer = {
    getCapabilities(
      call: ServerUnaryCall<GetCapabilitiesRequest, GetCapabilitiesResponse>,
      callback: sendUnaryData<GetCapabilitiesResponse>,
    ) {
      logger.debug({ requestId: call.request.requestId }, 'capabilities requested');
      callback(null, { executorVersion: AGENT_VERSION, enabledGates: [...options.enabledGates] });
    },
  };
  server.addService(ExecutorServiceService, implementation);
  let closing: Promise<void> | undefined;

  return {
    name: 'executor-server',
    async start() {
      await removeStaleSocket(options.socketPath);
      await new Promise<void>((resolve, reject) => {
        server.bindAsync(
          `unix://${options.socketPath}`,
          ServerCredentials.createInsecure(),
          (err) => {
            if (err) reject(err);
            else resolve();
          },
        );
      });
      // Owner only: the collector runs as the same user; nobody else in the Pod may connect.
      await chmod(options.socketPath, 0o600);
      logger.info({ socketPath: options.socketPath }, 'executor listening');
    },
    close() {
      closing ??= new Promise<void>((resolve) => {
        const force = setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, options.shutdownTimeoutMs);
        force.unref();
        server.tryShutdown(() => {
          clearTimeout(force);
          resolve();
        });
      }).then(() => rm(options.socketPath, { force: true }));
      return closing;
    },
  };
}

/** Removes a socket left by an earlier run; refuses to delete anything that is not a socket. */
async function removeStaleSocket(socketPath: string): Promise<void> {
  const existing = await lstat(socketPath).catch((err: unknown) => {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  });
  if (existing === undefined) return;
  if (!existing.isSocket()) {
    throw new Error(`refusing to replace ${socketPath}: it exists and is not a socket`);
  }
  await rm(socketPath, { force: true });
}
