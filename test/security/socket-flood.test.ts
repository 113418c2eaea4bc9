// The executor as a real process under a flood from a hostile client on its socket: 64 half-sent
// 4 MiB messages and 200 idle connections. The bound is fixed before measuring: RSS grows by
// less than 48 MiB, and the executor still answers. (The process runs under tsx here, whose
// baseline is far above the compiled image's, so the absolute container limit is not asserted.)
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createExecutorClient } from '../../collector/executor-client/executor-client.js';
import { halfSentMessage, rawConnection, rawHttp2, rssBytes } from '../helpers/executor-socket.js';
import { eventually } from '../helpers/kube.js';

const MIB = 1024 * 1024;
const MAX_GROWTH_BYTES = 48 * MIB;

describe('executor socket flood', () => {
  let dir = '';
  let child: ChildProcess | undefined;
  let socketPath = '';

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'kubexa-flood-'));
    socketPath = join(dir, 'executor', 'executor.sock');
    const configPath = join(dir, 'config.yaml');
    await writeFile(configPath, 'log:\n  level: warn\n');
    child = spawn(
      process.execPath,
      ['--import', 'tsx', 'executor/main.ts', `--config=${configPath}`],
      { env: { ...process.env, KUBEXA_EXECUTOR_SOCKET: socketPath }, stdio: 'ignore' },
    );
    await eventually(
      'the executor socket',
      async () => ((await stat(socketPath)).isSocket() ? true : undefined),
      { timeoutMs: 30_000 },
    );
  });

  afterAll(async () => {
    child?.kill('SIGKILL');
    await rm(dir, { recursive: true, force: true });
  });

  it('64 half-sent 4 MiB messages and 200 idle connections stay within the memory bound', async () => {
    const pid = child?.pid;
    if (pid === undefined) throw new Error('no executor process');
    const client = createExecutorClient(socketPath);
    try {
      await client.getCapabilities('warm-up', AbortSignal.timeout(10_000));
    } finally {
      client.close();
    }
    await sleep(500);
    const baseline = await rssBytes(pid);

    const sessions = Array.from({ length: 16 }, () => rawHttp2(socketPath));
    for (let i = 0; i < 64; i++) {
      const session = sessions[i % sessions.length];
      if (session === undefined) continue;
      halfSentMessage(session, '/executor.v1.ExecutorService/GetCapabilities', 4 * MIB, 2 * MIB);
    }
    const idle = Array.from({ length: 200 }, () => rawConnection(socketPath));
    await sleep(3_000);
    const peak = await rssBytes(pid);
    for (const session of sessions) session.destroy();
    for (const { socket } of idle) socket.destroy();

    process.stdout.write(
      `executor RSS: baseline ${(baseline / MIB).toFixed(1)} MiB, under flood ${(peak / MIB).toFixed(1)} MiB\n`,
    );
    expect(peak - baseline).toBeLessThan(MAX_GROWTH_BYTES);

    // And it still serves once the flood is gone.
    const after = createExecutorClient(socketPath);
    try {
      const answer = await eventually(
        'an answer after the flood',
        () => after.getCapabilities('after', AbortSignal.timeout(2_000)),
        { timeoutMs: 20_000 },
      );
      expect(answer.enabledGates).toEqual([]);
    } finally {
      after.close();
    }
  });
});
