// Copies the production dependencies one process needs into an image's node_modules, and writes
// that image's SBOM (CycloneDX JSON) from the lockfile. Used by Dockerfile.collector and
// Dockerfile.executor in their build stage:
//
//   node scripts/image-deps.mjs <entry.js> <out dir> <image name> <version> [install-only,...]
//
// The packages are found, not listed: every bare import reachable from the entry through the
// compiled files, then each package's declared dependencies, resolved the way Node resolves them.
// So the executor gets no SQLite and no fastify because it never imports them, and a new import
// can never be missing from an image. Packages only an install script runs (prebuild-install:
// the image compiles its native module from source instead) are named in the last argument and
// left out, with whatever only they need. Type declarations and source maps are not copied.
import { cpSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { Buffer } from 'node:buffer';
import { builtinModules } from 'node:module';
import { dirname, join, relative, resolve } from 'node:path';
import process from 'node:process';

const [entry, outDir, imageName, imageVersion, installOnly = ''] = process.argv.slice(2);
const excluded = new Set(installOnly.split(',').filter((name) => name !== ''));
if (entry === undefined || outDir === undefined || imageName === undefined) {
  process.stderr.write('usage: image-deps.mjs <entry.js> <out dir> <image name> <version>\n');
  process.exit(2);
}
const root = process.cwd();
const builtins = new Set(builtinModules);
const specifierPattern =
  /(?:\bimport\s*(?:[\w*{}\s,$]+\s*from\s*)?|\bexport\s*[\w*{}\s,$]*\s*from\s*|\bimport\s*\(\s*|\brequire\s*\(\s*)['"]([^'"]+)['"]/g;

/** Bare package names imported by the compiled files reachable from the entry. */
function importedPackages(entryFile) {
  const seen = new Set();
  const packages = new Set();
  const queue = [resolve(entryFile)];
  while (queue.length > 0) {
    const file = queue.pop();
    if (seen.has(file)) continue;
    seen.add(file);
    const source = readFileSync(file, 'utf8');
    for (const match of source.matchAll(specifierPattern)) {
      const specifier = match[1];
      if (specifier.startsWith('.')) {
        queue.push(resolve(dirname(file), specifier));
      } else if (!specifier.startsWith('node:') && !builtins.has(specifier)) {
        const parts = specifier.split('/');
        packages.add(specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]);
      }
    }
  }
  return packages;
}

/** The directory Node would load `name` from when required inside `fromDir`. */
function resolvePackageDir(name, fromDir) {
  for (let dir = fromDir; ; dir = dirname(dir)) {
    const candidate = join(dir, 'node_modules', name);
    if (existsSync(join(candidate, 'package.json'))) return candidate;
    if (dir === root || dir === dirname(dir)) return undefined;
  }
}

/** Every package directory in the runtime closure, relative to the project root. */
function closure(names) {
  const dirs = new Set();
  const queue = [...names].map((name) => ({ name, from: root, optional: false }));
  while (queue.length > 0) {
    const { name, from, optional } = queue.pop();
    if (excluded.has(name)) continue;
    const dir = resolvePackageDir(name, from);
    if (dir === undefined) {
      if (optional) continue;
      throw new Error(`${name} (needed from ${relative(root, from) || '.'}) is not installed`);
    }
    const rel = relative(root, dir);
    if (dirs.has(rel)) continue;
    dirs.add(rel);
    const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
    for (const dep of Object.keys(manifest.dependencies ?? {})) {
      queue.push({ name: dep, from: dir, optional: false });
    }
    for (const dep of Object.keys(manifest.optionalDependencies ?? {})) {
      queue.push({ name: dep, from: dir, optional: true });
    }
  }
  return [...dirs].sort();
}

function sbom(dirs) {
  const lock = JSON.parse(readFileSync(join(root, 'package-lock.json'), 'utf8'));
  const components = dirs.map((dir) => {
    const entry = lock.packages?.[dir];
    if (entry === undefined) throw new Error(`${dir} is not in package-lock.json`);
    const name = dir.slice(dir.lastIndexOf('node_modules/') + 'node_modules/'.length);
    const [algorithm, digest] = (entry.integrity ?? '').split('-');
    return {
      type: 'library',
      name,
      version: entry.version,
      purl: `pkg:npm/${name.replace('@', '%40')}@${entry.version}`,
      ...(entry.license === undefined ? {} : { licenses: [{ license: { id: entry.license } }] }),
      ...(digest === undefined
        ? {}
        : {
            hashes: [
              {
                alg: algorithm.toUpperCase().replace('SHA', 'SHA-'),
                content: Buffer.from(digest, 'base64').toString('hex'),
              },
            ],
          }),
    };
  });
  return {
    bomFormat: 'CycloneDX',
    specVersion: '1.5',
    version: 1,
    metadata: {
      component: { type: 'container', name: imageName, version: imageVersion ?? 'unknown' },
    },
    components,
  };
}

const dirs = closure(importedPackages(entry));
for (const dir of dirs) {
  // Nested node_modules are copied as packages of their own, only when they are in the closure.
  cpSync(join(root, dir), join(outDir, dir), {
    recursive: true,
    filter: (source) =>
      !relative(join(root, dir), source).startsWith('node_modules') &&
      !/\.(?:d\.[cm]?ts|map)$/.test(source),
  });
}
mkdirSync(outDir, { recursive: true });
writeFileSync(join(outDir, 'sbom.cdx.json'), `${JSON.stringify(sbom(dirs), null, 2)}\n`);
process.stdout.write(`${imageName}: ${String(dirs.length)} packages\n`);
