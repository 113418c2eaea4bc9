import { mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { createExecutorClient } from '../../collector/executor-client/executor-client.js';
import { Gate } from '../../proto/index.js';
import { AGENT_VERSION } from '../../shared/version.js';
import { createExecutorServer } from '../../executor/server/executor-server.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function startExecutor(enabledGates: Gate[]) {
  const dir = await mkdtemp(join(tmpdir(), 'kubexa-executor-'));
  const socketPath = join(dir, 'executor.sock');
  const server = createExecutorServer(
    { socketPath, enabledGates, shutdownTimeoutMs: 2_000 },
    { logger: pino({ level: 'silent' }) },
  );
  await server.start(new AbortController().signal);
  cleanups.push(async () => {
    await server.close();
    await rm(dir, { recursive: true, force: true });
  });
  return { server, socketPath };
}

describe('executor server on a Unix socket', () => {
  it('answers GetCapabilities with the gates from its own configuration', async () => {
    const { socketPath } = await startExecutor([Gate.GATE_POD_EXEC, Gate.GATE_NODE_OPS]);
    const client = createExecutorClient(socketPath);
    cleanups.push(() => {
      client.close();
      return Promise.resolve();
    });
    const answer = await client.getCapabilities('req-1', new AbortController().signal);
    expect(answer.executorVersion).toBe(AGENT_VERSION);
    expect(answer.enabledGates).toEqual([Gate.GATE_POD_EXEC, Gate.GATE_NODE_OPS]);
  });

  it('removes its socket on close, so nothing can connect afterwards', async () => {
    const { server, socketPath } = await startExecutor([]);
    expect((await stat(socketPath)).isSocket()).toBe(true);
    await server.close();
    await expect(stat(socketPath)).rejects.toThrow(/ENOENT/);
    const client = createExecutorClient(socketPath);
    cleanups.push(() => {
      client.close();
      return Promise.resolve();
    });
    const signal = AbortSignal.timeout(1_500);
    await expect(client.getCapabilities('req-2', signal)).rejects.toMatchObject({
      code: 'ERR_EXECUTOR_UNAVAILABLE',
    });
  });

  it('creates its socket for its owner only and replaces a stale socket of an earlier run', async () => {
    const first = await startExecutor([]);
    expect((await stat(first.socketPath)).mode & 0o777).toBe(0o600);
    // A second executor on the same path (a restart after a crash) takes the socket over.
    const second = createExecutorServer(
      { socketPath: first.socketPath, enabledGates: [], shutdownTimeoutMs: 2_000 },
      { logger: pino({ level: 'silent' }) },
    );
    await second.start(new AbortController().signal);
    cleanups.push(() => second.close());
    expect((await stat(first.socketPath)).isSocket()).toBe(true);
  });

  it('refuses to delete a file at the socket path that is not a socket', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'kubexa-executor-'));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const socketPath = join(dir, 'executor.sock');
    await writeFile(socketPath, 'not a socket');
    const server = createExecutorServer(
      { socketPath, enabledGates: [], shutdownTimeoutMs: 2_000 },
      { logger: pino({ level: 'silent' }) },
    );
    await expect(server.start(new AbortController().signal)).rejects.toThrow(
      /refusing to replace .* it exists and is not a socket/,
    );
    expect((await stat(socketPath)).isFile()).toBe(true);
  });
});
