// CI time: the two images are built one after the other on one docker daemon (test/node/images.ts,
// the classic builder). A cached layer is reused only when every instruction before it, from the
// same base, is the same. The collector's and the executor's build stages therefore begin with
// the same instructions up to and including `npm ci`, so the second image reuses the first's
// dependency layer instead of installing everything again (about 2 minutes on 2 loaded cores).
// The collector's compiler install comes after that shared prefix.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const repo = join(import.meta.dirname, '..', '..');

/** The build stage's instructions: comments dropped, continuation lines joined. */
function buildStageInstructions(dockerfile: string): string[] {
  const text = readFileSync(join(repo, dockerfile), 'utf8');
  const joined = text
    .split('\n')
    .filter((line) => !line.trimStart().startsWith('#'))
    .join('\n')
    .replace(/\\\n/g, ' ');
  const instructions = joined
    .split('\n')
    .map((line) => line.trim().replace(/\s+/g, ' '))
    .filter((line) => line !== '');
  const from = instructions.findIndex((line) => /^FROM \S+ AS build$/.test(line));
  const next = instructions.findIndex((line, index) => index > from && line.startsWith('FROM '));
  return instructions.slice(from, next);
}

/** The instructions up to and including the dependency install. */
function throughNpmCi(instructions: string[]): string[] {
  const npmCi = instructions.findIndex((line) => line.startsWith('RUN npm ci'));
  return npmCi < 0 ? [] : instructions.slice(0, npmCi + 1);
}

describe('the images share their dependency layer', () => {
  const collector = buildStageInstructions('Dockerfile.collector');
  const executor = buildStageInstructions('Dockerfile.executor');

  it('both build stages install the dependencies with npm ci', () => {
    expect(throughNpmCi(collector)).not.toEqual([]);
    expect(throughNpmCi(executor)).not.toEqual([]);
  });

  it('the instructions up to npm ci are the same in both, so the second build reuses the layer', () => {
    expect(throughNpmCi(collector)).toEqual(throughNpmCi(executor));
  });

  it('the collector installs its compiler only after the shared prefix', () => {
    const shared = throughNpmCi(collector).length;
    const aptGet = collector.findIndex((line) => line.includes('apt-get install'));
    expect(aptGet).toBeGreaterThanOrEqual(shared);
  });
});
