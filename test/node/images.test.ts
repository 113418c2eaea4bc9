// The two images, built with `docker build` from a Node 24 base made here, are what the
// Dockerfiles promise: at most 200 MB each, a non-root numeric user, OCI labels, no shell and no
// npm, only their own process's bundle and native modules (the executor has no SQLite and no
// fastify), an SBOM each, V8 sized from the container's memory limit; each process is PID 1 and
// stops cleanly on SIGTERM under a read-only root filesystem (`docker run`, `docker stop`); and the
// collector's native module, compiled in the build stage, loads on the real node.
import { execFile, execFileSync } from 'node:child_process';
import {
  chownSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { CoreV1Api } from '@kubernetes/client-node';
import { pino } from 'pino';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { DemoGateway } from '../../demo-gateway/demo-gateway.js';
import { REAL_NODE_LABEL, REAL_NODE_TAINT } from '../cluster/node.js';
import {
  createTestNamespace,
  eventually,
  loadKubeConfig,
  type TestNamespace,
} from '../helpers/kube.js';
import {
  buildAgentImages,
  dockerDataRoot,
  importIntoNode,
  startDocker,
  type BuiltImage,
  type BuiltImages,
} from './images.js';
import { unpackImage } from './image-rootfs.js';

const execFileAsync = promisify(execFile);

/** Target per image, uncompressed (issue 12), in docker's units (1 MB = 10^6 bytes). */
const TARGET_IMAGE_BYTES = 200_000_000;
/** `docker stop`'s grace period here: the chart's terminationGracePeriodSeconds is 45. */
const STOP_GRACE_SECONDS = 30;
const COLLECTOR_UID = 65532;
const EXECUTOR_UID = 65533;

let images: BuiltImages;

beforeAll(async () => {
  images = await buildAgentImages((line) => process.stdout.write(`${line}\n`));
  for (const image of [images.collector, images.executor]) {
    process.stdout.write(
      `${image.name}: ${(image.sizeBytes / 1e6).toFixed(1)} MB uncompressed (target ${String(TARGET_IMAGE_BYTES / 1e6)} MB)\n`,
    );
  }
}, 1_800_000);

interface ImageConfig {
  User: string;
  Labels: Record<string, string>;
  Entrypoint: string[];
  Env: string[];
}

/** The image's config and the paths of every file in its layers, read from the archive. */
function inspectArchive(image: BuiltImage): { config: ImageConfig; files: Set<string> } {
  const dir = mkdtempSync(join(tmpdir(), 'kubexa-image-'));
  try {
    execFileSync('tar', ['-xf', image.archive, '-C', dir]);
    const [manifest] = JSON.parse(readFileSync(join(dir, 'manifest.json'), 'utf8')) as {
      Config: string;
      Layers: string[];
    }[];
    if (manifest === undefined) throw new Error(`${image.archive} has no manifest`);
    const config = (
      JSON.parse(readFileSync(join(dir, manifest.Config), 'utf8')) as { config: ImageConfig }
    ).config;
    const files = new Set<string>();
    for (const layer of manifest.Layers) {
      const list = execFileSync('tar', ['-tf', join(dir, layer)], {
        encoding: 'utf8',
        maxBuffer: 256e6,
      });
      for (const file of list.split('\n')) files.add(file.replace(/^\.\//, '').replace(/\/$/, ''));
    }
    return { config, files };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * The collector's V8 flags for a process that starts once and then idles (Dockerfile.collector;
 * README, "Idle footprint"). Node exits with "bad option" on a flag its V8 does not know, so the
 * image-run test below fails on one the image's Node would refuse.
 */
const COLLECTOR_V8_FLAGS = [
  '--bytecode-old-age=1',
  '--flush-baseline-code',
  '--memory-reducer-gc-count=1',
];

describe.each([
  ['collector', COLLECTOR_UID, () => images.collector],
  ['executor', EXECUTOR_UID, () => images.executor],
] as const)('the %s image', (component, uid, image) => {
  let config: ImageConfig;
  let files: Set<string>;

  beforeAll(() => {
    ({ config, files } = inspectArchive(image()));
  });

  it('is at most 200 MB uncompressed', () => {
    expect(image().sizeBytes).toBeLessThanOrEqual(TARGET_IMAGE_BYTES);
  });

  it("runs as the chart's non-root numeric user, its bundle directly under node as PID 1", () => {
    expect(config.User).toBe(`${String(uid)}:${String(uid)}`);
    expect(config.Entrypoint).toEqual([
      'node',
      ...(component === 'collector' ? COLLECTOR_V8_FLAGS : []),
      `/app/${component}.js`,
    ]);
  });

  it('carries the OCI version, revision and source labels', () => {
    // The revision of the tree it was built from (cached by content, so not always HEAD).
    expect(config.Labels['org.opencontainers.image.version']).toBe('0.1.0');
    expect(config.Labels['org.opencontainers.image.revision']).toMatch(/^[0-9a-f]{40}$/);
    expect(config.Labels['org.opencontainers.image.source']).toMatch(/^https:\/\//);
  });

  it('sizes V8 from the container: old space a share of the memory limit, small semi-spaces', () => {
    expect(config.Env).toContain(
      'NODE_OPTIONS=--max-old-space-size-percentage=60 --max-semi-space-size=8',
    );
  });

  it("returns freed blocks to the kernel: glibc's mmap threshold fixed, not rising", () => {
    expect(config.Env).toContain('GLIBC_TUNABLES=glibc.malloc.mmap_threshold=32768');
  });

  it('has Node and its libraries, and no shell, no npm, no package manager', () => {
    expect(files.has('usr/local/bin/node')).toBe(true);
    for (const absent of [
      'bin/sh',
      'usr/bin/sh',
      'usr/local/bin/npm',
      'usr/local/lib/node_modules/npm/package.json',
      'usr/bin/apt-get',
      'usr/bin/dpkg',
    ]) {
      expect(files.has(absent), absent).toBe(false);
    }
  });

  it('ships the bundle and its source map, and no node_modules but native modules', () => {
    expect(files.has(`app/${component}.js`)).toBe(true);
    expect(files.has(`app/${component}.js.map`)).toBe(true);
    const packages = [...files].filter((f) =>
      /^app\/node_modules\/(@[^/]+\/)?[^/@]+\/package\.json$/.test(f),
    );
    expect(packages).toEqual(
      component === 'collector'
        ? expect.arrayContaining([
            'app/node_modules/better-sqlite3/package.json',
            'app/node_modules/bindings/package.json',
            'app/node_modules/file-uri-to-path/package.json',
          ])
        : [],
    );
  });

  it("loads no undici (Node's fetch and WebSocket) at start, on the image's own Node", async () => {
    // scripts/bundle.ts requires node:http instead of importing it: on Node 24 an import builds
    // the module's namespace, whose WebSocket getter loads undici (+12 MiB RSS, measured).
    const dir = mkdtempSync(join(tmpdir(), 'kubexa-image-run-'));
    try {
      const unpacked = await unpackImage(image().archive, dir);
      const loaded = join(dir, 'loaded-modules.txt');
      const preload = join(dir, 'record-modules.cjs');
      writeFileSync(
        preload,
        `process.on('exit', () => require('node:fs').writeFileSync(${JSON.stringify(loaded)}, process.moduleLoadList.join('\\n')));\n`,
      );
      // A missing config file: the process stops at its first line of main, after every import.
      const stderr = await execFileAsync(
        unpacked.command,
        ['--require', preload, ...unpacked.args, `--config=${join(dir, 'absent.yaml')}`],
        { env: { ...unpacked.env, PATH: process.env['PATH'] ?? '' } },
      ).then(
        () => '',
        (error: unknown) => {
          const stderr = (error as { stderr?: unknown }).stderr;
          return typeof stderr === 'string' ? stderr : '';
        },
      );
      // An entrypoint flag the image's Node does not know: it says "bad option" and exits.
      expect(existsSync(loaded), stderr).toBe(true);
      expect(stderr).not.toMatch(/bad option/);
      const modules = readFileSync(loaded, 'utf8').split('\n');
      expect(unpacked.version).toMatch(/^v24\./);
      expect(modules).toContain('NativeModule http');
      expect(modules.filter((m) => m.includes('undici'))).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('ships an SBOM naming every package in it, with Node and the Debian libraries', () => {
    const listed = new Set(image().sbom.components.map((c) => c.name));
    const installed = [...files]
      .filter((f) => /^app\/node_modules\/(@[^/]+\/)?[^/@]+\/package\.json$/.test(f))
      .map((f) => f.replace(/^app\/node_modules\//, '').replace(/\/package\.json$/, ''));
    expect(files.has('app/sbom.cdx.json')).toBe(true);
    for (const name of [...installed, 'node', 'libc6', '@grpc/grpc-js', 'pino']) {
      expect(listed.has(name), name).toBe(true);
    }
  });
});

describe('each image holds only its own process runtime dependencies', () => {
  const names = (image: BuiltImage) => image.sbom.components.map((c) => c.name);

  it('the executor has no SQLite, no fastify, no code generator', () => {
    expect(names(images.executor)).not.toContain('better-sqlite3');
    expect(names(images.executor)).not.toContain('fastify');
    expect(names(images.executor)).not.toContain('ts-proto');
  });

  it('the collector has its native module compiled, and no install-time fetcher or generator', () => {
    const { files } = inspectArchive(images.collector);
    expect(names(images.collector)).not.toContain('prebuild-install');
    expect(names(images.collector)).not.toContain('ts-proto');
    expect(files.has('app/node_modules/better-sqlite3/build/Release/better_sqlite3.node')).toBe(
      true,
    );
    // Only the addon: no SQLite sources, no object files.
    expect(files.has('app/node_modules/better-sqlite3/deps')).toBe(false);
  });
});

describe('docker run', () => {
  let docker: Awaited<ReturnType<typeof startDocker>>;
  let dir: string;
  const containers: string[] = [];
  const dockerCli = async (args: string[]) =>
    (await execFileAsync('docker', args, { env: docker.env, maxBuffer: 64e6 })).stdout;
  /** `docker stop` with the grace period, then the exit code and the whole log. */
  const stop = async (id: string) => {
    await dockerCli(['stop', '--time', String(STOP_GRACE_SECONDS), id]);
    const exitCode = Number((await dockerCli(['inspect', '-f', '{{.State.ExitCode}}', id])).trim());
    const { stdout, stderr } = await execFileAsync('docker', ['logs', id], { env: docker.env });
    return { exitCode, log: stdout + stderr };
  };
  const waitForLog = (id: string, text: string) =>
    eventually(
      `"${text}" in the container's log`,
      async () => {
        const { stdout, stderr } = await execFileAsync('docker', ['logs', id], {
          env: docker.env,
        });
        return (stdout + stderr).includes(text) ? true : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 500 },
    );

  beforeAll(async () => {
    docker = await startDocker(dockerDataRoot());
    for (const image of [images.collector, images.executor]) {
      await dockerCli(['load', '--quiet', '--input', image.archive]);
    }
    dir = mkdtempSync(join(tmpdir(), 'kubexa-docker-run-'));
  }, 600_000);

  afterAll(async () => {
    for (const id of containers) await dockerCli(['rm', '--force', id]).catch(() => undefined);
    await docker.stop();
    rmSync(dir, { recursive: true, force: true });
  }, 120_000);

  it("V8's heap limit follows the container's memory limit", async () => {
    const limit = await dockerCli([
      'run',
      '--rm',
      '--memory=256m',
      '--network=none',
      '--entrypoint=node',
      images.executor.name,
      '-p',
      'require("v8").getHeapStatistics().heap_size_limit',
    ]);
    // 60 % of 256 MiB for the old space plus three 8 MiB semi-spaces (V8's young generation),
    // within V8's rounding to pages.
    expect(Math.abs(Number(limit) / 2 ** 20 - (256 * 0.6 + 3 * 8))).toBeLessThan(2);
  });

  it('the executor, PID 1 under a read-only root, exits 0 within the grace period on SIGTERM', async () => {
    const configPath = join(dir, 'executor.yaml');
    writeFileSync(
      configPath,
      stringify({ exec: { pod: { enabled: true, rules: [{ namespace: 'team-*' }] } } }),
    );
    const id = (
      await dockerCli([
        'run',
        '--detach',
        '--read-only',
        '--network=none',
        '--tmpfs=/run/kubexa:mode=1777',
        `--volume=${configPath}:/config/config.yaml:ro`,
        '--env=KUBEXA_EXECUTOR_SOCKET=/run/kubexa/executor/executor.sock',
        images.executor.name,
      ])
    ).trim();
    containers.push(id);
    await waitForLog(id, 'executor started');
    const stopped = await stop(id);
    expect({ exitCode: stopped.exitCode, clean: stopped.log.includes('executor stopped') }).toEqual(
      { exitCode: 0, clean: true },
    );
  });

  it('the collector, PID 1 under a read-only root, streams, then exits 0 within the grace period on SIGTERM', async () => {
    const token = 'docker-run-tenant-token';
    const gateway = new DemoGateway({ acceptToken: token }, { logger: pino({ level: 'silent' }) });
    try {
      const port = await gateway.listen('127.0.0.1', 0);
      const dataDir = join(dir, 'data');
      mkdirSync(dataDir);
      chownSync(dataDir, COLLECTOR_UID, COLLECTOR_UID);
      const configPath = join(dir, 'collector.yaml');
      writeFileSync(
        configPath,
        stringify({
          gateway: { address: `127.0.0.1:${String(port)}`, tls: false },
          buffer: { spill_dir: '/var/lib/kubexa' },
          observability: { health_addr: '127.0.0.1:0', metrics_addr: '127.0.0.1:0' },
        }),
      );
      const kubeconfig = join(dir, 'kubeconfig');
      writeFileSync(kubeconfig, flatKubeconfig(inject('kubeconfigPath')), { mode: 0o644 });
      const id = (
        await dockerCli([
          'run',
          '--detach',
          '--read-only',
          // The test cluster's API server and the gateway listen on the machine's loopback.
          '--network=host',
          '--memory=512m',
          `--volume=${configPath}:/config/config.yaml:ro`,
          `--volume=${kubeconfig}:/kube/config:ro`,
          `--volume=${dataDir}:/var/lib/kubexa`,
          '--env=KUBECONFIG=/kube/config',
          `--env=KUBEXA_TENANT_TOKEN=${token}`,
          images.collector.name,
          '--config=/config/config.yaml',
        ])
      ).trim();
      containers.push(id);
      await waitForLog(id, 'collector started');
      await gateway.waitForSession();
      const stopped = await stop(id);
      expect({
        exitCode: stopped.exitCode,
        clean: stopped.log.includes('"msg":"collector stopped"'),
      }).toEqual({ exitCode: 0, clean: true });
    } finally {
      await gateway.close();
    }
  });
});

/** The test cluster's kubeconfig with its certificates and key inline (the container's user reads it). */
function flatKubeconfig(path: string): string {
  const kc = loadKubeConfig(path);
  const cluster = kc.getCurrentCluster();
  const user = kc.getCurrentUser();
  if (cluster === null || user === null) throw new Error(`${path} has no current context`);
  const inline = (data: string | undefined, file: string | undefined) =>
    data ?? readFileSync(file ?? '').toString('base64');
  return stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [
      {
        name: 'test',
        cluster: {
          server: cluster.server,
          'certificate-authority-data': inline(cluster.caData, cluster.caFile),
        },
      },
    ],
    users: [
      {
        name: 'test',
        user: {
          'client-certificate-data': inline(user.certData, user.certFile),
          'client-key-data': inline(user.keyData, user.keyFile),
        },
      },
    ],
    contexts: [{ name: 'test', context: { cluster: 'test', user: 'test' } }],
    'current-context': 'test',
  });
}

describe('on the real node', () => {
  const kc = loadKubeConfig(inject('kubeconfigPath'));
  const core = kc.makeApiClient(CoreV1Api);
  let ns: TestNamespace;

  beforeAll(async () => {
    ns = await createTestNamespace(kc, 'images');
    importIntoNode(images, inject('clusterBinDir'), inject('realNodeContainerdSocket'));
  });

  afterAll(async () => {
    await ns.delete();
  });

  it("the collector's SQLite loads against the runtime's Node and glibc, non-root, read-only root", async () => {
    await core.createNamespacedPod({
      namespace: ns.name,
      body: {
        metadata: { name: 'sqlite' },
        spec: {
          nodeSelector: { [REAL_NODE_LABEL]: 'true' },
          tolerations: [{ key: REAL_NODE_TAINT, operator: 'Exists' }],
          restartPolicy: 'Never',
          containers: [
            {
              name: 'collector',
              image: images.collector.name,
              imagePullPolicy: 'Never',
              command: [
                'node',
                '-e',
                "const D = require('/app/node_modules/better-sqlite3'); const db = new D(':memory:'); " +
                  "console.log('sqlite', db.prepare('select sqlite_version() as v').get().v, 'uid', process.getuid()); " +
                  "try { require('fs').writeFileSync('/app/x', ''); } catch (e) { console.log(e.code); }",
              ],
              securityContext: {
                runAsNonRoot: true,
                readOnlyRootFilesystem: true,
                allowPrivilegeEscalation: false,
                capabilities: { drop: ['ALL'] },
              },
            },
          ],
        },
      },
    });
    const pod = await eventually(
      'the pod to finish',
      async () => {
        const current = await core.readNamespacedPod({ name: 'sqlite', namespace: ns.name });
        return ['Succeeded', 'Failed'].includes(current.status?.phase ?? '') ? current : undefined;
      },
      { timeoutMs: 120_000, intervalMs: 500 },
    );
    const log = await core.readNamespacedPodLog({ name: 'sqlite', namespace: ns.name });
    expect(pod.status?.phase, log).toBe('Succeeded');
    expect(log).toMatch(/^sqlite 3\.\d+\.\d+ uid 65532\nEROFS\n$/);
  });
});
