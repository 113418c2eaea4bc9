// The executor's socket on a real Unix socket: its directory and modes, who may connect, what a
// live or stale socket at its path gets, its limits, and the log line every call leaves.
import {
  chmod,
  chown,
  lstat,
  mkdir,
  mkdtemp,
  rm,
  stat,
  symlink,
  writeFile,
} from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { credentials, Metadata, type ServiceError } from '@grpc/grpc-js';
import { pino, type Logger } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { createExecutorClient } from '../../collector/executor-client/executor-client.js';
import { ExecutorServiceClient, Gate } from '../../proto/index.js';
import { systemClock } from '../../shared/clock.js';
import { AGENT_VERSION } from '../../shared/version.js';
import { createCommandGuard } from '../../executor/guard/authorize-command.js';
import { createCommandVerifier } from '../../executor/guard/verify-command.js';
import { createExecutorServer, type SocketLimits } from '../../executor/server/executor-server.js';
import { captureLogger, connectAs, rawConnection } from '../helpers/executor-socket.js';
import { eventually } from '../helpers/kube.js';

/** Users that exist only as numbers: a stranger, and a member of the shared group. */
const STRANGER_UID = 4242;
const SHARED_GID = 4343;

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const noKeysGuard = () =>
  createCommandGuard(createCommandVerifier({ keys: new Map(), clock: systemClock }), new Set());

/** A parent directory other users may traverse, like the Pod's socket volume. */
async function socketParent(): Promise<string> {
  const parent = await mkdtemp(join(tmpdir(), 'kubexa-executor-'));
  await chmod(parent, 0o755);
  cleanups.push(() => rm(parent, { recursive: true, force: true }));
  return parent;
}

interface StartOptions {
  readonly enabledGates?: Gate[];
  readonly socketPath?: string;
  readonly socketGroup?: number;
  readonly limits?: Partial<SocketLimits>;
  readonly logger?: Logger;
}

async function startExecutor(options: StartOptions = {}) {
  const socketPath = options.socketPath ?? join(await socketParent(), 'executor', 'executor.sock');
  const server = createExecutorServer(
    {
      socketPath,
      ownUid: process.getuid?.() ?? -1,
      ...(options.socketGroup === undefined ? {} : { socketGroup: options.socketGroup }),
      enabledGates: options.enabledGates ?? [],
      guard: noKeysGuard(),
      shutdownTimeoutMs: 2_000,
      ...(options.limits === undefined ? {} : { limits: options.limits }),
    },
    { logger: options.logger ?? pino({ level: 'silent' }) },
  );
  await server.start(new AbortController().signal);
  cleanups.push(() => server.close());
  return { server, socketPath };
}

function client(socketPath: string) {
  const c = createExecutorClient(socketPath);
  cleanups.push(() => {
    c.close();
    return Promise.resolve();
  });
  return c;
}

describe('executor server on a Unix socket', () => {
  it('answers GetCapabilities with the gates from its own configuration', async () => {
    const { socketPath } = await startExecutor({
      enabledGates: [Gate.GATE_POD_EXEC, Gate.GATE_NODE_OPS],
    });
    const answer = await client(socketPath).getCapabilities('req-1', AbortSignal.timeout(5_000));
    expect(answer.executorVersion).toBe(AGENT_VERSION);
    expect(answer.enabledGates).toEqual([Gate.GATE_POD_EXEC, Gate.GATE_NODE_OPS]);
  });

  it('removes its socket on close, so nothing can connect afterwards', async () => {
    const { server, socketPath } = await startExecutor();
    expect((await stat(socketPath)).isSocket()).toBe(true);
    await server.close();
    await expect(stat(socketPath)).rejects.toThrow(/ENOENT/);
    await expect(
      client(socketPath).getCapabilities('req-2', AbortSignal.timeout(1_500)),
    ).rejects.toMatchObject({ code: 'ERR_EXECUTOR_UNAVAILABLE' });
  });

  it('puts the socket (0660) in its own directory (0750) under the shared group', async () => {
    const { socketPath } = await startExecutor({ socketGroup: SHARED_GID });
    const dir = await lstat(join(socketPath, '..'));
    expect(dir.mode & 0o7777).toBe(0o750);
    expect(dir.gid).toBe(SHARED_GID);
    const socket = await lstat(socketPath);
    expect(socket.mode & 0o777).toBe(0o660);
    expect(socket.gid).toBe(SHARED_GID);
  });

  it('without a shared group, the directory and socket are its owner only', async () => {
    const { socketPath } = await startExecutor();
    expect((await lstat(join(socketPath, '..'))).mode & 0o777).toBe(0o700);
    expect((await lstat(socketPath)).mode & 0o777).toBe(0o600);
  });

  it('refuses a user outside the shared group, admits one inside it', async () => {
    const { socketPath } = await startExecutor({ socketGroup: SHARED_GID });
    // A stranger: neither the owner nor in the group. The directory stops it (EACCES).
    expect(await connectAs(socketPath, STRANGER_UID, STRANGER_UID)).toBe('EACCES');
    // The collector's position: another user, in the shared group.
    expect(await connectAs(socketPath, STRANGER_UID, SHARED_GID)).toBe('connected');
  });

  it('never replaces a live socket: a second executor on the path refuses to start', async () => {
    const first = await startExecutor();
    const second = createExecutorServer(
      {
        socketPath: first.socketPath,
        ownUid: process.getuid?.() ?? -1,
        enabledGates: [],
        guard: noKeysGuard(),
        shutdownTimeoutMs: 2_000,
      },
      { logger: pino({ level: 'silent' }) },
    );
    await expect(second.start(new AbortController().signal)).rejects.toThrow(
      /another executor is listening on it/,
    );
    // The first one still serves.
    const answer = await client(first.socketPath).getCapabilities(
      'after',
      AbortSignal.timeout(5_000),
    );
    expect(answer.executorVersion).toBe(AGENT_VERSION);
  });

  it('replaces a dead socket and a stray file left in its own directory', async () => {
    const parent = await socketParent();
    const socketPath = join(parent, 'executor', 'executor.sock');
    const first = await startExecutor({ socketPath });
    // A crash leaves the socket file behind without a listener: simulate by a dead socket file.
    await first.server.close();
    await mkdir(join(parent, 'executor'), { recursive: true });
    await writeFile(socketPath, 'left by an earlier run');
    const second = await startExecutor({ socketPath });
    expect((await stat(second.socketPath)).isSocket()).toBe(true);
  });

  it('refuses a socket directory that belongs to another user, or is a symlink', async () => {
    const parent = await socketParent();
    const planted = join(parent, 'planted');
    await mkdir(planted, { mode: 0o777 });
    await chown(planted, STRANGER_UID, STRANGER_UID);
    await expect(startExecutor({ socketPath: join(planted, 'executor.sock') })).rejects.toThrow(
      /owned by uid 4242/,
    );
    const elsewhere = join(parent, 'elsewhere');
    await mkdir(elsewhere);
    await symlink(elsewhere, join(parent, 'link'));
    await expect(
      startExecutor({ socketPath: join(parent, 'link', 'executor.sock') }),
    ).rejects.toThrow(/not a directory/);
  });

  it('ends a call whose message exceeds the limit, and logs it', async () => {
    const { logger, lines } = captureLogger();
    const { socketPath } = await startExecutor({ logger, limits: { maxMessageBytes: 1024 } });
    const raw = new ExecutorServiceClient(`unix://${socketPath}`, credentials.createInsecure());
    cleanups.push(() => {
      raw.close();
      return Promise.resolve();
    });
    const err = await new Promise<ServiceError | null>((resolve) => {
      raw.getCapabilities({ requestId: 'x'.repeat(4096) }, new Metadata(), (e) => {
        resolve(e);
      });
    });
    expect(err?.code).toBe(8); // RESOURCE_EXHAUSTED
    await eventually(
      'the log line',
      () =>
        Promise.resolve(
          lines().find((line) => line['msg'] === 'executor call' && line['decision'] === 'failed'),
        ),
      { timeoutMs: 5_000 },
    );
  });

  it('logs every call at info with method, decision, status and a capped reason', async () => {
    const { logger, lines } = captureLogger();
    const { socketPath } = await startExecutor({ logger });
    await client(socketPath).getCapabilities('req-log', AbortSignal.timeout(5_000));
    const line = await eventually(
      'the call log line',
      () => Promise.resolve(lines().find((l) => l['msg'] === 'executor call')),
      { timeoutMs: 5_000 },
    );
    expect(line).toMatchObject({
      level: 30,
      method: '/executor.v1.ExecutorService/GetCapabilities',
      decision: 'answered',
      status: 'OK',
    });
  });

  it('closes connections above the limit and connections that never speak', async () => {
    const { logger, lines } = captureLogger();
    const { socketPath } = await startExecutor({
      logger,
      limits: { maxConnections: 3, firstByteTimeoutMs: 300 },
    });
    const connections = Array.from({ length: 10 }, () => rawConnection(socketPath));
    cleanups.push(() => {
      for (const { socket } of connections) socket.destroy();
      return Promise.resolve();
    });
    // All ten end: seven at once (over the limit), three after the first-byte timeout.
    await Promise.all(connections.map(({ closed }) => closed));
    await sleep(50);
    expect(lines().filter((l) => l['msg'] === 'executor connection refused')).toHaveLength(7);
    expect(lines().filter((l) => l['msg'] === 'executor connection closed')).toHaveLength(3);
  });

  it('keeps a connection that spoke past the first-byte timeout (a node job streams for minutes)', async () => {
    // The HTTP/2 session reads the socket's handle itself, so the socket never emits 'data':
    // the timeout must look at bytesRead, or every connection dies firstByteTimeoutMs after accept.
    const { logger, lines } = captureLogger();
    const { socketPath } = await startExecutor({ logger, limits: { firstByteTimeoutMs: 200 } });
    const client = new ExecutorServiceClient(`unix://${socketPath}`, credentials.createInsecure());
    cleanups.push(() => {
      client.close();
      return Promise.resolve();
    });
    const ask = () =>
      new Promise<string>((resolve, reject) => {
        client.getCapabilities({ requestId: 'r' }, (err: ServiceError | null, response) => {
          if (err !== null) reject(err);
          else resolve(response.executorVersion);
        });
      });
    await ask();
    await sleep(600);
    expect(await ask()).toBe(AGENT_VERSION);
    expect(lines().filter((l) => l['msg'] === 'executor connection closed')).toHaveLength(0);
  });
});
