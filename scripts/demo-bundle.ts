// The demo runs the collector and the executor as the images do: each one esbuild bundle
// (`npm run bundle`, scripts/bundle.ts), here in dist/demo-bundle/. Started from the TypeScript
// sources through tsx instead, each process spent 7-10 s of a loaded 2-core machine just loading
// modules (tsx's loader hooks on each of @kubernetes/client-node's files; the bundle is one file).
// The bundle is rebuilt only when a file it was built from changed: the build's metafile names
// every input, and a hash over their contents is kept beside it.
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const STAMP = '.inputs-hash';
/** Read by esbuild or deciding what it resolves, but not inputs in its metafile. */
const ALSO_HASHED = ['package.json', 'package-lock.json', 'tsconfig.json', 'scripts/bundle.ts'];

export interface DemoBundle {
  readonly dir: string;
  /** node arguments that start `name` from the bundle. */
  args(name: 'collector' | 'executor'): string[];
}

/**
 * An input a bundle plugin made up (`<namespace>:<path>`, e.g. `required-builtin:http`): no file,
 * its text comes from scripts/bundle.ts, which is hashed.
 */
const VIRTUAL_INPUT = /^[a-z][a-z-]*:/;

/** A hash of every file the bundle in `dir` was built from; undefined when one is missing. */
export function inputsHash(root: string, dir: string): string | undefined {
  const metaPath = join(dir, 'meta.json');
  if (!existsSync(metaPath)) return undefined;
  const meta = JSON.parse(readFileSync(metaPath, 'utf8')) as { inputs?: Record<string, unknown> };
  const files = Object.keys(meta.inputs ?? {}).filter((path) => !VIRTUAL_INPUT.test(path));
  const hash = createHash('sha256');
  for (const path of [...files, ...ALSO_HASHED].sort()) {
    const file = join(root, path);
    if (!existsSync(file)) return undefined;
    hash.update(path).update('\0').update(readFileSync(file)).update('\0');
  }
  return hash.digest('hex');
}

function isCurrent(root: string, dir: string): boolean {
  const stamp = join(dir, STAMP);
  if (!existsSync(stamp) || !['collector.js', 'executor.js'].every((f) => existsSync(join(dir, f))))
    return false;
  return readFileSync(stamp, 'utf8').trim() === inputsHash(root, dir);
}

/** Builds dist/demo-bundle unless it is current; `built` says whether it did. */
export async function ensureDemoBundle(root: string): Promise<DemoBundle & { built: boolean }> {
  const dir = join(root, 'dist', 'demo-bundle');
  const bundle: DemoBundle = {
    dir,
    args: (name) => ['--enable-source-maps', join(dir, `${name}.js`)],
  };
  if (isCurrent(root, dir)) return { ...bundle, built: false };
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', join(root, 'scripts', 'bundle.ts'), `--outdir=${dir}`],
    { cwd: root, stdio: ['ignore', 'ignore', 'pipe'] },
  );
  const stderr: string[] = [];
  child.stderr.on('data', (chunk: Buffer) => stderr.push(chunk.toString()));
  const [code] = (await once(child, 'exit')) as [number | null];
  if (code !== 0) throw new Error(`npm run bundle failed (${String(code)}): ${stderr.join('')}`);
  const hash = inputsHash(root, dir);
  if (hash !== undefined) writeFileSync(join(dir, STAMP), `${hash}\n`);
  return { ...bundle, built: true };
}
