// The two images, built with `docker build` from a Node 24 base made here, are what the
// Dockerfiles promise: a non-root numeric user, OCI labels, no npm, only their own process's
// packages (the executor has no SQLite and no fastify), an SBOM each; and the collector's native
// module, compiled in the build stage, loads on the real node under a read-only root filesystem.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { REAL_NODE_LABEL, REAL_NODE_TAINT } from '../cluster/node.js';
import {
  createTestNamespace,
  eventually,
  loadKubeConfig,
  type TestNamespace,
} from '../helpers/kube.js';
import { buildAgentImages, type BuiltImage, type BuiltImages } from './images.js';

/**
 * Target per image, uncompressed (issue 12). Printed against each image's size rather than
 * asserted: both miss it today (see the README), and a failing CI would only hide the figure.
 */
const TARGET_IMAGE_BYTES = 200 * 1024 * 1024;

let images: BuiltImages;

beforeAll(async () => {
  images = await buildAgentImages((line) => process.stdout.write(`${line}\n`));
  for (const image of [images.collector, images.executor]) {
    const verdict = image.sizeBytes <= TARGET_IMAGE_BYTES ? 'within' : 'MISSES';
    process.stdout.write(
      `${image.name}: ${(image.sizeBytes / 2 ** 20).toFixed(1)} MiB uncompressed, ${verdict} the ${String(TARGET_IMAGE_BYTES / 2 ** 20)} MiB target\n`,
    );
  }
}, 1_800_000);

interface ImageConfig {
  User: string;
  Labels: Record<string, string>;
  Entrypoint: string[];
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

describe.each([
  ['collector', () => images.collector],
  ['executor', () => images.executor],
] as const)('the %s image', (component, image) => {
  let config: ImageConfig;
  let files: Set<string>;

  beforeAll(() => {
    ({ config, files } = inspectArchive(image()));
  });

  it('runs as a non-root numeric user, its process directly as PID 1', () => {
    expect(config.User).toBe('65532:65532');
    expect(config.Entrypoint).toEqual(['node', `dist/js/${component}/main.js`]);
  });

  it('carries the OCI version, revision and source labels', () => {
    // The revision of the tree it was built from (cached by content, so not always HEAD).
    expect(config.Labels['org.opencontainers.image.version']).toBe('0.1.0');
    expect(config.Labels['org.opencontainers.image.revision']).toMatch(/^[0-9a-f]{40}$/);
    expect(config.Labels['org.opencontainers.image.source']).toMatch(/^https:\/\//);
  });

  it('has Node but no npm, no npx and no compiler headers', () => {
    expect(files.has('usr/local/bin/node')).toBe(true);
    expect(files.has('usr/local/lib/node_modules/npm/package.json')).toBe(false);
    expect(files.has('usr/local/bin/npm')).toBe(false);
    expect(files.has('usr/local/bin/npx')).toBe(false);
    expect(files.has('usr/local/include/node/node.h')).toBe(false);
  });

  it('ships an SBOM that lists exactly the packages in its node_modules', () => {
    const installed = [...files]
      .filter((file) => /^app\/node_modules\/(@[^/]+\/)?[^/@]+\/package\.json$/.test(file))
      .map((file) => file.replace(/^app\/node_modules\//, '').replace(/\/package\.json$/, ''))
      .filter((name) => !name.includes('/node_modules/'));
    const listed = image().sbom.components.map((c) => c.name);
    expect(files.has('app/sbom.cdx.json')).toBe(true);
    expect(new Set(listed)).toEqual(new Set(installed));
  });
});

describe('each image holds only its own process runtime dependencies', () => {
  const names = (image: BuiltImage) => image.sbom.components.map((c) => c.name);

  it('the executor has no SQLite, no fastify, no code generator', () => {
    expect(names(images.executor)).not.toContain('better-sqlite3');
    expect(names(images.executor)).not.toContain('fastify');
    expect(names(images.executor)).not.toContain('ts-proto');
  });

  it('the collector has its native module compiled, and no install-time fetcher', () => {
    const { files } = inspectArchive(images.collector);
    expect(names(images.collector)).toContain('better-sqlite3');
    expect(names(images.collector)).not.toContain('prebuild-install');
    expect(names(images.collector)).not.toContain('ts-proto');
    expect(files.has('app/node_modules/better-sqlite3/build/Release/better_sqlite3.node')).toBe(
      true,
    );
    // Only the addon: no SQLite sources, no object files.
    expect(files.has('app/node_modules/better-sqlite3/deps')).toBe(false);
  });
});

describe('on the real node', () => {
  const kc = loadKubeConfig(inject('kubeconfigPath'));
  const core = kc.makeApiClient(CoreV1Api);
  let ns: TestNamespace;

  beforeAll(async () => {
    ns = await createTestNamespace(kc, 'images');
    const ctr = join(inject('clusterBinDir'), 'ctr');
    execFileSync(ctr, [
      '--address',
      inject('realNodeContainerdSocket'),
      '--namespace',
      'k8s.io',
      'images',
      'import',
      '--local',
      images.collector.archive,
    ]);
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
