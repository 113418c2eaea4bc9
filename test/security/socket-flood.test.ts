// The executor as a real process under a flood from a hostile client on its socket: 64 half-sent
// 4 MiB messages and 200 idle connections. The bounds are fixed before measuring: RSS grows by
// less than 48 MiB, and the executor still answers. Twice: under tsx (the source as it is, whose
// baseline is far above the image's), and as the image runs it: the bundle (`npm run bundle`,
// written far from the repository's node_modules) with the image's V8 sizing for the chart's
// memory limit, where the peak must also stay under that limit (executor.resources.limits.memory
// in the chart's values).
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { createExecutorClient } from '../../collector/executor-client/executor-client.js';
import { halfSentMessage, rawConnection, rawHttp2, rssBytes } from '../helpers/executor-socket.js';
import { eventually } from '../helpers/kube.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const MIB = 1024 * 1024;
const MAX_GROWTH_BYTES = 48 * MIB;

/** The executor container's memory limit as the chart ships it, in bytes ("256Mi"). */
async function chartMemoryLimitBytes(): Promise<number> {
  const values = parse(await readFile(join(root, 'helm/kubexa-agent/values.yaml'), 'utf8')) as {
    executor: { resources: { limits: { memory: string } } };
  };
  const limit = values.executor.resources.limits.memory;
  const match = /^(\d+)Mi$/.exec(limit);
  if (match?.[1] === undefined) throw new Error(`unexpected executor memory limit ${limit}`);
  return Number(match[1]) * MIB;
}

/**
 * The image's NODE_OPTIONS (Dockerfile.executor) for a given limit: the old generation at 60 % of
 * it. Node 24 in the image reads the cgroup limit (--max-old-space-size-percentage=60); Node 20
 * here has no such flag, so the same size is given in MiB.
 */
const imageNodeOptions = (limitBytes: number): string =>
  `--max-old-space-size=${String(Math.floor((limitBytes * 0.6) / MIB))} --max-semi-space-size=8`;

interface Variant {
  readonly name: string;
  /** The command line and environment to start the executor with. */
  readonly start: (dir: string) => Promise<{ args: string[]; env: NodeJS.ProcessEnv }>;
  /** The container limit the peak must stay under, when the variant is the image's process. */
  readonly limitBytes?: () => Promise<number>;
}

const VARIANTS: readonly Variant[] = [
  {
    name: 'under tsx',
    start: () => Promise.resolve({ args: ['--import', 'tsx', 'executor/main.ts'], env: {} }),
  },
  {
    name: 'bundled, with the image V8 sizing for the chart memory limit',
    start: async (dir) => {
      const bundleDir = join(dir, 'bundle');
      await promisify(execFile)(
        process.execPath,
        [
          '--import',
          'tsx',
          join(root, 'scripts', 'bundle.ts'),
          `--outdir=${bundleDir}`,
          '--only=executor',
        ],
        { cwd: root },
      );
      return {
        args: [join(bundleDir, 'executor.js')],
        env: {
          NODE_ENV: 'production',
          NODE_OPTIONS: imageNodeOptions(await chartMemoryLimitBytes()),
        },
      };
    },
    limitBytes: chartMemoryLimitBytes,
  },
];

describe.each(VARIANTS)('executor socket flood, $name', (variant) => {
  let dir = '';
  let child: ChildProcess | undefined;
  let socketPath = '';

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'kubexa-flood-'));
    socketPath = join(dir, 'executor', 'executor.sock');
    const configPath = join(dir, 'config.yaml');
    await writeFile(configPath, 'log:\n  level: warn\n');
    const { args, env } = await variant.start(dir);
    const childEnv: NodeJS.ProcessEnv = {
      ...process.env,
      ...env,
      KUBEXA_EXECUTOR_SOCKET: socketPath,
    };
    if (env['NODE_OPTIONS'] === undefined) delete childEnv['NODE_OPTIONS'];
    child = spawn(process.execPath, [...args, `--config=${configPath}`], {
      // The bundle runs from a directory without node_modules: only what it carries loads.
      cwd: variant.limitBytes === undefined ? root : dir,
      env: childEnv,
      stdio: 'ignore',
    });
    await eventually(
      'the executor socket',
      async () => ((await stat(socketPath)).isSocket() ? true : undefined),
      { timeoutMs: 30_000 },
    );
  }, 180_000);

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
      `executor (${variant.name}) RSS: baseline ${(baseline / MIB).toFixed(1)} MiB, under flood ${(peak / MIB).toFixed(1)} MiB\n`,
    );
    expect(peak - baseline).toBeLessThan(MAX_GROWTH_BYTES);
    if (variant.limitBytes !== undefined) {
      expect(peak).toBeLessThan(await variant.limitBytes());
    }

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
