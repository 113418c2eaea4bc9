// scripts/package-chart.sh: the chart archive and the single-file manifest for kubectl users.
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildClusterBinaries } from '../cluster/cluster.js';
import { parseManifest, REPO_ROOT, runHelm } from './helm.js';

const execFileAsync = promisify(execFile);

describe('scripts/package-chart.sh', () => {
  let dist = '';
  let helm = '';
  let printed: string[] = [];

  beforeAll(async () => {
    helm = join(await buildClusterBinaries(process.env), 'helm');
    dist = await mkdtemp(join(tmpdir(), 'kubexa-dist-'));
    const { stdout } = await execFileAsync(
      'bash',
      [join(REPO_ROOT, 'scripts', 'package-chart.sh')],
      {
        env: { ...process.env, DIST: dist, HELM: helm },
      },
    );
    printed = stdout.trim().split('\n');
  });

  afterAll(async () => {
    if (dist !== '') await rm(dist, { recursive: true, force: true });
  });

  it('packages the chart, without the chart-only schema fragment', async () => {
    const archive = printed.find((line) => line.endsWith('.tgz'));
    expect(archive).toMatch(/kubexa-agent-\d+\.\d+\.\d+\.tgz$/);
    const { stdout } = await execFileAsync('tar', ['tzf', archive!]);
    const files = stdout.trim().split('\n');
    expect(files).toContain('kubexa-agent/values.schema.json');
    expect(files).toContain('kubexa-agent/templates/deployment.yaml');
    expect(files).not.toContain('kubexa-agent/values.schema.chart-only.json');
    // The archive installs as it is: helm reads it back.
    await runHelm(helm, ['show', 'chart', archive!]);
  });

  it('renders a read-only manifest for kubectl apply, token from an existing Secret', async () => {
    const objects = parseManifest(await readFile(join(dist, 'kubexa-agent.yaml'), 'utf8'));
    const kinds = objects.map((o) => `${o.kind}/${o.metadata.name}`);
    expect(kinds).toContain('Namespace/kubexa');
    expect(kinds).toContain('Deployment/kubexa-agent');
    expect(kinds).toContain('ClusterRole/kubexa:kubexa-agent');
    expect(kinds.filter((k) => k.includes('executor'))).toEqual([]);
    expect(objects.filter((o) => o.kind === 'Secret')).toEqual([]);
    // The Namespace comes first so `kubectl apply -f` creates it before anything inside it.
    expect(objects[0]?.kind).toBe('Namespace');
  });
});
