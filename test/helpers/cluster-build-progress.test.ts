// build.sh's progress lines reach the caller of buildClusterBinaries while build.sh still runs
// (`npm run demo` and `npm test` on a machine whose binaries are not built). Nothing is compiled:
// a scratch cache holds every part already marked built, and the test holds the cache's lock, so
// build.sh says it waits and then stays blocked until the test lets go.
import { execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { buildClusterBinaries } from '../cluster/cluster.js';

const buildScript = join(import.meta.dirname, '..', 'cluster', 'build.sh');
const scratch = await mkdtemp(join(tmpdir(), 'kubexa-build-progress-'));
const env = { ...process.env, KUBEXA_CLUSTER_CACHE: scratch };

afterAll(() => rm(scratch, { recursive: true, force: true }));

/** Marks every part built in the scratch cache (empty directories: nothing runs them). */
async function markPartsBuilt(): Promise<void> {
  const { stdout } = await promisify(execFile)('bash', [buildScript, '--parts'], { env });
  for (const line of stdout.trim().split('\n')) {
    const dir = line.slice(line.indexOf(' ') + 1);
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, '.complete'), '');
  }
}

/** Holds the scratch cache's build lock until `release` is called (flock(1), as build.sh uses). */
async function holdLock(): Promise<{ release: () => Promise<void> }> {
  const holder = spawn('flock', ['--close', join(scratch, '.lock'), '-c', 'echo locked; cat'], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const [chunk] = (await once(holder.stdout, 'data')) as [Buffer];
  expect(chunk.toString()).toBe('locked\n');
  return {
    release: async () => {
      holder.stdin.end();
      await once(holder, 'close');
    },
  };
}

describe('buildClusterBinaries', () => {
  it("passes build.sh's progress lines on while build.sh still runs", async () => {
    await markPartsBuilt();
    const lock = await holdLock();
    const lines: string[] = [];
    let settled = false;
    const built = buildClusterBinaries(env, (line) => lines.push(line)).finally(() => {
      settled = true;
    });
    const waiting = `build.sh: another build.sh is building into ${scratch}; waiting for it to finish`;
    // build.sh hashes every part's inputs before it reaches the lock: seconds on loaded cores.
    for (let i = 0; i < 600 && !lines.includes(waiting); i++) await sleep(50);
    expect(lines).toContain(waiting);
    expect(settled).toBe(false);
    await lock.release();
    const binDir = await built;
    expect(lines).toContainEqual(
      expect.stringMatching(/^build\.sh: \[1\/\d+\] control-plane: cached$/),
    );
    expect(existsSync(join(binDir, '.complete'))).toBe(true);
  }, 60_000);
});
