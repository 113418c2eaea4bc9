// The closing summary line, checked on a real vitest run of a fixture file: two tests behind a
// `beforeAll` that throws, one failing test, one test that skips itself at run time, one
// passing test and one `it.skip`.
import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const fixtureDir = join(root, 'test', 'fixtures', 'summary-reporter');

describe('summary reporter', () => {
  it('counts the tests behind a beforeAll that threw as failed, not skipped', () => {
    const run = spawnSync(
      process.execPath,
      [
        join(root, 'node_modules', 'vitest', 'vitest.mjs'),
        'run',
        '--config',
        join(fixtureDir, 'vitest.config.ts'),
        '--reporter',
        join(root, 'test', 'helpers', 'summary-reporter.ts'),
      ],
      { cwd: fixtureDir, encoding: 'utf8', timeout: 60_000, env: { ...process.env, CI: '1' } },
    );
    const summary = run.stdout.split('\n').filter((line) => line.startsWith('tests: '));
    expect(summary, run.stdout + run.stderr).toEqual(['tests: 1 passed, 3 failed, 2 skipped']);
    expect(run.status).toBe(1);
    // Where the time went, before the closing line: the fixture file with its wall time.
    expect(run.stdout).toMatch(
      /slowest test files \(wall time\):\n {2,} *\d+\.\d s {2}before-all-throws\.fixture\.ts\n/,
    );
  });
});
