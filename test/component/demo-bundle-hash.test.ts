// The demo rebuilds its bundle only when a file it was built from changed (scripts/demo-bundle.ts):
// a hash over every input the metafile names. The inputs a bundle plugin makes up
// (`required-builtin:http`, `collector-narrowing:node-fetch`) are no files; counted as missing
// files, they made every `npm run demo` rebuild the bundle.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { inputsHash } from '../../scripts/demo-bundle.js';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** A root with the files the hash always reads, one source file, and a bundle's meta.json. */
function fixture(inputs: readonly string[]): { root: string; dir: string } {
  const root = mkdtempSync(join(tmpdir(), 'kubexa-demo-bundle-'));
  dirs.push(root);
  for (const file of ['package.json', 'package-lock.json', 'tsconfig.json', 'scripts/bundle.ts']) {
    mkdirSync(join(root, file, '..'), { recursive: true });
    writeFileSync(join(root, file), `${file}\n`);
  }
  writeFileSync(join(root, 'main.ts'), 'export {};\n');
  const dir = join(root, 'dist', 'demo-bundle');
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    join(dir, 'meta.json'),
    JSON.stringify({ inputs: Object.fromEntries(inputs.map((input) => [input, {}])) }),
  );
  return { root, dir };
}

describe('the demo bundle hash', () => {
  it('hashes the files a bundle was built from, not the inputs a plugin made up', () => {
    const { root, dir } = fixture([
      'main.ts',
      'required-builtin:http',
      'collector-narrowing:node-fetch',
    ]);
    const before = inputsHash(root, dir);
    expect(before).toMatch(/^[0-9a-f]{64}$/);
    writeFileSync(join(root, 'main.ts'), 'export const changed = 1;\n');
    expect(inputsHash(root, dir)).not.toBe(before);
  });

  it('has no hash while a file the bundle was built from is missing', () => {
    const { root, dir } = fixture(['main.ts', 'gone.ts']);
    expect(inputsHash(root, dir)).toBeUndefined();
  });
});
