// Writes one image's SBOM (CycloneDX JSON) from what its bundle really holds: every package whose
// files esbuild put into the process's bundle (from the metafile), plus the native packages copied
// beside it in node_modules/. Versions, hashes and licenses come from package-lock.json, so the SBOM
// names exactly what the lockfile's integrity pinned. Used by Dockerfile.collector and
// Dockerfile.executor in their build stage:
//
//   node scripts/image-sbom.mjs <bundle dir> <process> <image name> <version> [os packages]
//
// <bundle dir> is scripts/bundle.ts's --outdir (it holds meta.json, <process>.js, node_modules/).
// [os packages] is the list scripts/image-rootfs.sh writes ("<debian package> <version>" lines).
// Node itself is listed as the binary running this script: the image ships that same binary.
import { Buffer } from 'node:buffer';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import process from 'node:process';

const [bundleDir, processName, imageName, imageVersion, osPackages] = process.argv.slice(2);
if (bundleDir === undefined || processName === undefined || imageName === undefined) {
  process.stderr.write('usage: image-sbom.mjs <bundle dir> <process> <image name> <version>\n');
  process.exit(2);
}
const lock = JSON.parse(readFileSync('package-lock.json', 'utf8'));

/**
 * The lockfile key of the package an input file belongs to: the path from the first
 * node_modules/ through the last package directory (nested node_modules included).
 */
function packageKey(input) {
  const start = input.indexOf('node_modules/');
  if (start === -1) return undefined;
  const parts = input.slice(start).split('/');
  const key = [];
  let i = 0;
  while (parts[i] === 'node_modules' && i + 1 < parts.length) {
    const scoped = parts[i + 1].startsWith('@');
    const width = scoped ? 3 : 2;
    key.push(...parts.slice(i, i + width));
    i += width;
  }
  return key.join('/');
}

const meta = JSON.parse(readFileSync(join(bundleDir, 'meta.json'), 'utf8'));
const output = Object.entries(meta.outputs).find(([file]) => file.endsWith(`/${processName}.js`));
if (output === undefined) throw new Error(`${processName}.js is not in ${bundleDir}/meta.json`);
const keys = new Set();
for (const input of Object.keys(output[1].inputs)) {
  const key = packageKey(input);
  if (key !== undefined) keys.add(key);
}
// Native packages beside the bundle are top-level packages of the build's node_modules.
const nativeDir = join(bundleDir, 'node_modules');
if (existsSync(nativeDir)) {
  for (const entry of readdirSync(nativeDir)) {
    const names = entry.startsWith('@')
      ? readdirSync(join(nativeDir, entry)).map((name) => `${entry}/${name}`)
      : [entry];
    for (const name of names) keys.add(`node_modules/${name}`);
  }
}

const components = [...keys].sort().map((key) => {
  const entry = lock.packages?.[key];
  if (entry === undefined) throw new Error(`${key} is not in package-lock.json`);
  const name = key.slice(key.lastIndexOf('node_modules/') + 'node_modules/'.length);
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
const runtime = [
  {
    type: 'application',
    name: 'node',
    version: process.versions.node,
    purl: `pkg:generic/node@${process.versions.node}`,
    licenses: [{ license: { id: 'MIT' } }],
  },
  ...(osPackages === undefined ? '' : readFileSync(osPackages, 'utf8'))
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => {
      const [name, version] = line.split(' ');
      return {
        type: 'library',
        name,
        version,
        purl: `pkg:deb/debian/${name}@${version}?arch=amd64`,
      };
    }),
];
const sbom = {
  bomFormat: 'CycloneDX',
  specVersion: '1.5',
  version: 1,
  metadata: {
    component: { type: 'container', name: imageName, version: imageVersion ?? 'unknown' },
  },
  components: [...runtime, ...components],
};
writeFileSync(join(bundleDir, 'sbom.cdx.json'), `${JSON.stringify(sbom, null, 2)}\n`);
process.stdout.write(`${imageName}: ${String(components.length)} packages in the SBOM\n`);
