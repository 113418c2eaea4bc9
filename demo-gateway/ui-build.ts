// The web UI's bundle: built by Vite from demo-gateway/ui into dist/demo-ui, never committed.
// A build records a hash of its sources; the gateway serves a bundle only when that hash still
// matches, so a stale bundle is rebuilt rather than served.
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = fileURLToPath(new URL('.', import.meta.url));
export const UI_SOURCE_DIR = join(here, 'ui');
export const UI_OUT_DIR = join(here, '..', 'dist', 'demo-ui');
const STAMP = '.source-hash';
/** Files outside ui/ that the bundle is built from. */
const SHARED_SOURCES = [join(here, 'api-types.ts'), join(here, 'vite.config.ts')];

function filesUnder(dir: string): string[] {
  return readdirSync(dir)
    .flatMap((name) => {
      const path = join(dir, name);
      return statSync(path).isDirectory() ? filesUnder(path) : [path];
    })
    .sort();
}

/** A hash of every source file of the bundle (names and contents). */
export function uiSourceHash(): string {
  const hash = createHash('sha256');
  for (const path of [...filesUnder(UI_SOURCE_DIR), ...SHARED_SOURCES]) {
    hash.update(relative(here, path)).update('\0').update(readFileSync(path)).update('\0');
  }
  return hash.digest('hex');
}

/** True when dist/demo-ui holds a bundle built from the current sources. */
export function uiBuildIsCurrent(outDir = UI_OUT_DIR): boolean {
  const stamp = join(outDir, STAMP);
  return existsSync(stamp) && readFileSync(stamp, 'utf8').trim() === uiSourceHash();
}

/** Builds the bundle with Vite (a devDependency, loaded only here) and stamps it. */
export async function buildUi(outDir = UI_OUT_DIR): Promise<void> {
  const { build } = await import('vite');
  const hash = uiSourceHash();
  await build({
    configFile: join(here, 'vite.config.ts'),
    logLevel: 'warn',
    build: { outDir, emptyOutDir: true },
  });
  const { writeFileSync } = await import('node:fs');
  writeFileSync(join(outDir, STAMP), `${hash}\n`);
}

/** Builds the bundle unless a current one exists; returns whether it built. */
export async function ensureUiBuilt(outDir = UI_OUT_DIR): Promise<boolean> {
  if (uiBuildIsCurrent(outDir)) return false;
  await buildUi(outDir);
  return true;
}
