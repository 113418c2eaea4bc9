// Supply chain: the dependencies allowed to run install scripts are allowed at the version that was
// reviewed, and npm can check that version. package.json#allowScripts pins `name@version`; npm
// takes the trusted version from the lockfile's registry URL (never from the tarball's own
// package.json), so each pinned package keeps its `resolved` URL (.npmrc keeps npm from omitting
// it). A dependency bump that leaves the pin behind fails here, not silently at install time.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const repo = join(import.meta.dirname, '..', '..');
const readJson = (file: string): unknown => JSON.parse(readFileSync(join(repo, file), 'utf8'));

interface LockEntry {
  readonly version?: string;
  readonly resolved?: string;
  readonly hasInstallScript?: boolean;
}

const manifest = readJson('package.json') as { allowScripts?: Record<string, boolean> };
const lock = readJson('package-lock.json') as { packages: Record<string, LockEntry> };

/** `@scope/name@1.2.3` -> [`@scope/name`, `1.2.3`]. */
function splitKey(key: string): [string, string] {
  const at = key.lastIndexOf('@');
  return at > 0 ? [key.slice(0, at), key.slice(at + 1)] : [key, ''];
}

describe('allowScripts', () => {
  const entries = Object.entries(manifest.allowScripts ?? {});

  it('pins every allowed package to one exact version, the one the lockfile installs', () => {
    const found = entries.map(([key, allowed]) => {
      const [name, version] = splitKey(key);
      return {
        key,
        allowed,
        locked: lock.packages[`node_modules/${name}`]?.version ?? 'absent',
        version,
      };
    });
    expect(found.map(({ key, allowed, locked }) => ({ key, allowed, locked }))).toEqual(
      found.map(({ key, version }) => ({ key, allowed: true, locked: version })),
    );
  });

  it("keeps each pinned package's registry URL in the lockfile, naming that version", () => {
    for (const [key] of entries) {
      const [name, version] = splitKey(key);
      const tarball = `${name.split('/').at(-1) ?? ''}-${version}.tgz`;
      expect(lock.packages[`node_modules/${name}`]?.resolved, key).toBe(
        `https://registry.npmjs.org/${name}/-/${tarball}`,
      );
    }
  });

  it('covers every locked package with an install script, and nothing else', () => {
    const withScripts = Object.entries(lock.packages)
      .filter(([path, entry]) => path !== '' && entry.hasInstallScript === true)
      .map(([path, entry]) => `${path.replace(/^.*node_modules\//, '')}@${entry.version ?? ''}`)
      .sort();
    expect(entries.map(([key]) => key).sort()).toEqual(withScripts);
  });
});
