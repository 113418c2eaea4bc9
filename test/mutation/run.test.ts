// The mutation runner fails when a listed mutation survives or its original text is gone, and
// never touches the working tree: run on a fixture list of four (caught, survives, rotten, and
// one whose test name filter selects no test).
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const list = join(root, 'test', 'fixtures', 'mutation', 'failing-list.ts');

const runner = (...args: string[]) =>
  spawnSync(
    process.execPath,
    ['--import', 'tsx', join(root, 'test', 'mutation', 'run.ts'), '--list', list, ...args],
    {
      cwd: root,
      encoding: 'utf8',
      timeout: 120_000,
    },
  );

describe('mutation runner', () => {
  it('reports the caught, the surviving, the rotten and the misnamed mutation, and exits 1', () => {
    const clockBefore = readFileSync(join(root, 'shared', 'clock.ts'), 'utf8');
    const run = runner();
    const output = run.stdout + run.stderr;
    expect(output).toMatch(
      /^caught\s+shared\/clock\.ts:\d+\s+[\d.]+\s+killed by: clampTimerDelay/m,
    );
    expect(output).toMatch(/^survives\s+shared\/clock\.ts:\d+\s+[\d.]+\s+SURVIVED$/m);
    expect(output).toMatch(
      /^rotten\s+shared\/clock\.ts\s+[\d.]+\s+NOT FOUND: original text not found/m,
    );
    expect(output).toMatch(
      /^misnamed\s+shared\/clock\.ts:\d+\s+[\d.]+\s+TESTS FAIL UNMUTATED: every test was skipped/m,
    );
    expect(output).toContain('mutation score: 1/4 killed (25 %)');
    expect(run.status).toBe(1);
    expect(readFileSync(join(root, 'shared', 'clock.ts'), 'utf8')).toBe(clockBefore);
  }, 120_000);

  it('passes with only the caught mutation, and --check fails on the rotten one alone', () => {
    const caught = runner('caught');
    expect(caught.stdout).toContain('mutation score: 1/1 killed (100 %)');
    expect(caught.status).toBe(0);
    const check = runner('--check', 'rotten');
    expect(check.stdout).toContain('0 of 1 original texts found once');
    expect(check.status).toBe(1);
  }, 120_000);
});
