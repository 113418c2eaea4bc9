// `npm run demo -- --current-context` against a kubeconfig whose current context is the real test
// cluster, in a real pseudo-terminal (node-pty): it names the context and the API server, asks,
// and starts nothing on "n"; with --yes it asks nothing and connects the collector there.
import { spawn, type IPty } from 'node-pty';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { loadKubeConfig } from '../helpers/kube.js';
import { until } from '../helpers/wait.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const kubeconfigPath = inject('kubeconfigPath');
const kc = loadKubeConfig(kubeconfigPath);

interface Demo {
  readonly term: IPty;
  output(): string;
  readonly exited: Promise<number>;
}

const running: Demo[] = [];
afterEach(async () => {
  for (const demo of running.splice(0)) {
    demo.term.kill('SIGINT');
    await demo.exited;
  }
});

function startDemo(args: readonly string[]): Demo {
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(process.env)) if (value !== undefined) env[key] = value;
  env['KUBECONFIG'] = kubeconfigPath;
  const term = spawn(
    process.execPath,
    ['--import', 'tsx', join(root, 'scripts', 'demo.ts'), '--http-port', '0', ...args],
    { cwd: root, env, cols: 200, rows: 50 },
  );
  let output = '';
  term.onData((data) => (output += data));
  const exited = new Promise<number>((resolve) => {
    term.onExit(({ exitCode }) => {
      resolve(exitCode);
    });
  });
  const demo = { term, output: () => output, exited };
  running.push(demo);
  return demo;
}

describe('npm run demo -- --current-context', () => {
  it('names the context and API server, asks, and starts nothing when the answer is n', async () => {
    const demo = startDemo(['--current-context']);
    await until(() => demo.output().includes('[y/N]'), 'the question', { timeoutMs: 90_000 });
    expect(demo.output()).toContain(`context: ${kc.getCurrentContext()}`);
    expect(demo.output()).toContain(`API server: ${kc.getCurrentCluster()?.server ?? '?'}`);
    demo.term.write('n\r');
    expect(await demo.exited).toBe(1);
    expect(demo.output()).toContain('not confirmed: nothing was started');
    expect(demo.output()).not.toContain('Kubexa demo:');
    expect(demo.output()).not.toContain('collector |');
    running.splice(running.indexOf(demo), 1);
  });

  it('asks nothing with --yes and connects the collector to that cluster', async () => {
    const demo = startDemo(['--current-context', '--yes']);
    await until(() => demo.output().includes('collector connected at'), 'the collector', {
      timeoutMs: 120_000,
      intervalMs: 100,
    });
    expect(demo.output()).toContain(`context: ${kc.getCurrentContext()}`);
    expect(demo.output()).not.toContain('[y/N]');
    // No local cluster: the banner names the current kubeconfig instead.
    expect(demo.output()).not.toContain('starting a local test cluster');
    expect(demo.output()).toContain(`current kubeconfig ${kubeconfigPath}`);
    demo.term.kill('SIGINT');
    await demo.exited;
    running.splice(running.indexOf(demo), 1);
    expect(demo.output()).toContain('demo stopped');
  });
});
