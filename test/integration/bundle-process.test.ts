// The bundled collector (`npm run bundle`, written to a temp directory far from the repository's
// node_modules, so only what the bundle carries can load) against the test cluster and an
// in-process demo gateway: it handshakes with the kube-system UID, opens its SQLite buffer and
// checkpoints through the better-sqlite3 addon copied beside it, becomes ready, and exits 0 on
// SIGTERM. Its text is ASCII only (V8 keeps it as a one-byte string), and it carries no HTTP
// framework and only the part of client-node and zod it runs.
import { execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { promisify } from 'node:util';
import { Worker } from 'node:worker_threads';
import { fileURLToPath } from 'node:url';
import { CoreV1Api } from '@kubernetes/client-node';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type {
  RelayThreadData,
  RelayThreadEvent,
  RelayThreadRequest,
} from '../../collector/consoles/relay-thread-protocol.js';
import { DemoGateway } from '../../demo-gateway/demo-gateway.js';
import { loadKubeConfig } from '../helpers/kube.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const TOKEN = 'bundle-process-token-0123456789';

interface LogLine {
  readonly msg: string;
  readonly [key: string]: unknown;
}

describe('bundled collector process', () => {
  let dir: string;
  let bundleDir: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'kubexa-bundle-process-'));
    bundleDir = join(dir, 'bundle');
    await promisify(execFile)(
      process.execPath,
      ['--import', 'tsx', join(root, 'scripts', 'bundle.ts'), `--outdir=${bundleDir}`],
      { cwd: root },
    );
  });

  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it('is ASCII only, so V8 holds its source text at one byte a character', () => {
    // The text stays in V8's heap for the process's life: one non-ASCII character (a comment's
    // typographic quote, a micro sign in a regular expression) doubles it (scripts/bundle.ts).
    for (const name of ['collector.js', 'console-relay-worker.js', 'executor.js']) {
      const text = readFileSync(join(bundleDir, name), 'latin1');
      const at = text.search(/[\x80-\xff]/);
      expect(at === -1 ? 'ascii' : `${name}: ${text.slice(Math.max(0, at - 60), at + 20)}`).toBe(
        'ascii',
      );
    }
  });

  it('carries the console relay thread beside the process: it loads and relays from there', async () => {
    // What collector/consoles/console-relay-thread.ts starts in the bundle (every module of the
    // bundle has collector.js's URL): here with no executor at its socket, so the console it
    // takes is refused by the relay itself, and its log line comes back as a message.
    // A gateway address that accepts connections and never answers: the call waits there.
    const silent = createServer(() => undefined);
    silent.listen(0, '127.0.0.1');
    await once(silent, 'listening');
    const { port } = silent.address() as AddressInfo;
    const data: RelayThreadData = {
      socketPath: join(dir, 'no-executor.sock'),
      dial: { address: `127.0.0.1:${String(port)}`, tls: false, dialTimeoutMs: 1000 },
      logLevel: 'info',
    };
    const worker = new Worker(join(bundleDir, 'console-relay-worker.js'), { workerData: data });
    const events: RelayThreadEvent[] = [];
    worker.on('message', (event: RelayThreadEvent) => events.push(event));
    const failed = once(worker, 'error');
    try {
      const request: RelayThreadRequest = {
        type: 'console',
        request: {
          $case: 'consoleAttach',
          value: { requestId: 'bundle-relay', sessionId: 's', resumeAfter: '0', signedCommand: '' },
        },
        headers: {},
      };
      worker.postMessage(request);
      await Promise.race([
        failed.then(([err]) => Promise.reject(err as Error)),
        (async () => {
          for (let i = 0; i < 300; i++) {
            const logged = events.some(
              (e) => e.type === 'log' && e.line.includes('executor console stream failed'),
            );
            if (logged) return;
            await new Promise((resolve) => setTimeout(resolve, 50));
          }
        })(),
      ]);
      expect(events).toContainEqual({ type: 'taken', requestId: 'bundle-relay' });
      expect(
        events.some((e) => e.type === 'log' && e.line.includes('executor console stream failed')),
      ).toBe(true);
    } finally {
      await worker.terminate();
      silent.close();
    }
  });

  it('requires node:http and node:util, never imports them (their ES namespace loads undici on Node 24)', () => {
    for (const name of ['collector.js', 'console-relay-worker.js', 'executor.js']) {
      const text = readFileSync(join(bundleDir, name), 'utf8');
      expect(text, name).not.toMatch(/\bfrom\s*["'](node:)?(http|util)["']/);
      expect(text, name).not.toMatch(/\bimport\s*\(\s*["'](node:)?(http|util)["']/);
    }
    // The collector's bundle holds the module that requires node:http in their place.
    expect(readFileSync(join(bundleDir, 'collector.js'), 'utf8')).toContain(
      'module.exports=__require("node:http")',
    );
  });

  it('carries no HTTP framework: its two HTTP servers are node:http', () => {
    // fastify and its schema compilers were about 800 KB of the bundle's text, held for the
    // process's life, and 3.5 MiB of an idle collector's RSS (README, "Idle footprint").
    const meta = JSON.parse(readFileSync(join(bundleDir, 'meta.json'), 'utf8')) as {
      outputs: Record<string, { inputs: Record<string, unknown> }>;
    };
    const [collector] = Object.entries(meta.outputs).filter(([file]) =>
      file.endsWith('/collector.js'),
    );
    const frameworks = Object.keys(collector?.[1].inputs ?? {}).filter((input) =>
      /node_modules\/(fastify|ajv|fast-json-stringify|find-my-way|avvio)\//.test(input),
    );
    expect(collector).toBeDefined();
    expect(frameworks.map((input) => input.replace(/^.*node_modules\//, ''))).toEqual([]);
  });

  it('carries only the part of client-node and zod the collector runs (scripts/bundle.ts, collectorNarrowing)', () => {
    // Each of these was bundle text held for the process's life, and some ran at start (tr46's
    // Unicode tables): together about 6 MiB of the idle collector's RSS (README, "Idle footprint").
    const meta = JSON.parse(readFileSync(join(bundleDir, 'meta.json'), 'utf8')) as {
      outputs: Record<string, { inputs: Record<string, unknown> }>;
    };
    const inputsOf = (name: string): string[] =>
      Object.keys(
        Object.entries(meta.outputs).find(([file]) => file.endsWith(`/${name}`))?.[1].inputs ?? {},
      );
    const left = inputsOf('collector.js').filter((input) =>
      /client-node\/dist\/(gen\/models|cache|serializer|api|watch|log)|node_modules\/(node-fetch|whatwg-url|tr46)\/|zod\/v4\/locales\/(?!en\.js)/.test(
        input,
      ),
    );
    expect(left.map((input) => input.replace(/^.*node_modules\//, ''))).toEqual([]);
    // What it keeps: KubeConfig's module and zod's English messages.
    expect(inputsOf('collector.js')).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/client-node\/dist\/config\.js$/),
        expect.stringMatching(/zod\/v4\/locales\/en\.js$/),
      ]),
    );
    // The executor's Pod and access review clients are client-node's generated API classes,
    // which fetch with node-fetch: its bundle keeps them.
    expect(inputsOf('executor.js')).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/client-node\/dist\/gen\/apis\/CoreV1Api\.js$/),
        expect.stringMatching(/node_modules\/node-fetch\//),
      ]),
    );
  });

  it('starts from its own directory, handshakes, uses SQLite, becomes ready, exits 0 on SIGTERM', async () => {
    const kubeconfigPath = inject('kubeconfigPath');
    const kubeSystem = await loadKubeConfig(kubeconfigPath)
      .makeApiClient(CoreV1Api)
      .readNamespace({ name: 'kube-system' });
    const gateway = new DemoGateway({ acceptToken: TOKEN }, { logger: pino({ level: 'silent' }) });
    const port = await gateway.listen('127.0.0.1', 0);
    const dataDir = join(dir, 'data');
    const configPath = join(dir, 'config.yaml');
    writeFileSync(
      configPath,
      [
        'gateway:',
        `  address: 127.0.0.1:${String(port)}`,
        '  tls: false',
        'buffer:',
        `  spill_dir: ${JSON.stringify(dataDir)}`,
        'observability:',
        '  health_addr: "127.0.0.1:0"',
        '  metrics_addr: "127.0.0.1:0"',
        'collect:',
        '  logs:',
        `    checkpoint_dir: ${JSON.stringify(join(dataDir, 'log-checkpoints'))}`,
        '',
      ].join('\n'),
    );
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      KUBECONFIG: kubeconfigPath,
      KUBEXA_TENANT_TOKEN: TOKEN,
    };
    delete env['KUBERNETES_SERVICE_HOST'];
    delete env['KUBEXA_AGENT_ID'];
    // cwd is the bundle's directory's parent: nothing resolves from the repository.
    const child = spawn(
      process.execPath,
      ['--enable-source-maps', join(bundleDir, 'collector.js'), `--config=${configPath}`],
      { cwd: dir, env, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    const exited = once(child, 'exit');
    const stderr: string[] = [];
    child.stderr.on('data', (chunk: Buffer) => stderr.push(chunk.toString()));
    // Rejects when the process exits, so that a bundle that cannot start fails at once.
    const failed = exited.then(() => {
      throw new Error(`the bundled collector exited: ${stderr.join('')}`);
    });
    failed.catch(() => undefined);
    const lines: LogLine[] = [];
    const started = new Promise<LogLine>((resolve) => {
      createInterface({ input: child.stdout }).on('line', (raw) => {
        try {
          const line = JSON.parse(raw) as LogLine;
          lines.push(line);
          if (line.msg === 'collector started') resolve(line);
        } catch {
          // Not JSON: kept out of `lines`.
        }
      });
    });
    try {
      const session = await Promise.race([gateway.waitForSession(), failed]);
      expect(session.clusterId).toBe(kubeSystem.metadata?.uid);
      const healthPort = ((await Promise.race([started, failed]))['ports'] as { health: number })
        .health;
      let status = 0;
      for (let i = 0; i < 300 && status !== 200; i++) {
        status = await fetch(`http://127.0.0.1:${String(healthPort)}/readyz`).then(
          (r) => r.status,
          () => 0,
        );
        if (status !== 200) await new Promise((resolve) => setTimeout(resolve, 100));
      }
      expect(status).toBe(200);
      // The durable buffer and the log checkpoints are SQLite files, opened through the addon.
      expect(existsSync(join(dataDir, 'buffer.db'))).toBe(true);
      expect(existsSync(join(dataDir, 'log-checkpoints', 'pod-logs.db'))).toBe(true);

      child.kill('SIGTERM');
      expect(await exited).toEqual([0, null]);
      expect(lines.map((line) => line.msg)).toContain('collector stopped');
    } finally {
      child.kill('SIGKILL');
      await gateway.close();
    }
  });
});
