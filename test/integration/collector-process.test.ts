// The real collector process (collector/main.ts) against the test cluster and an in-process
// demo gateway on loopback: handshake with the kube-system UID, readiness, graceful SIGTERM,
// the persisted agent id, and the fatal exit on UNAUTHENTICATED.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import {
  appendFileSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { CoreV1Api } from '@kubernetes/client-node';
import { pino } from 'pino';
import { afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { AGENT_ID_FILE } from '../../collector/agent-id.js';
import { DemoGateway, type DemoGatewayOptions } from '../../demo-gateway/demo-gateway.js';
import { AgentMessage, ConfigUpdate } from '../../proto/index.js';
import {
  createTestNamespace,
  criLine,
  eventually,
  loadKubeConfig,
  serveLogsFromFile,
} from '../helpers/kube.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const TOKEN = 'collector-process-token-0123456789';
const WRONG_TOKEN = 'not-the-right-token-9876543210';

interface LogLine {
  readonly msg: string;
  readonly [key: string]: unknown;
}

interface CollectorProcess {
  readonly lines: LogLine[];
  readonly stdout: string[];
  readonly stderr: string[];
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Resolves with the first log line whose msg is `msg`. */
  waitForLog(msg: string): Promise<LogLine>;
  kill(signal: NodeJS.Signals): void;
}

function startCollector(configPath: string, env: Record<string, string>): CollectorProcess {
  const childEnv: NodeJS.ProcessEnv = { ...process.env, ...env };
  delete childEnv['KUBERNETES_SERVICE_HOST'];
  delete childEnv['KUBEXA_AGENT_ID'];
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', join(root, 'collector', 'main.ts'), `--config=${configPath}`],
    { cwd: root, env: childEnv, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const lines: LogLine[] = [];
  const stdout: string[] = [];
  const stderr: string[] = [];
  const waiters: { msg: string; resolve: (line: LogLine) => void }[] = [];
  createInterface({ input: child.stdout }).on('line', (raw) => {
    stdout.push(raw);
    let line: LogLine;
    try {
      line = JSON.parse(raw) as LogLine;
    } catch {
      return;
    }
    lines.push(line);
    for (const waiter of waiters.filter((w) => w.msg === line.msg)) {
      waiters.splice(waiters.indexOf(waiter), 1);
      waiter.resolve(line);
    }
  });
  child.stderr.on('data', (chunk: Buffer) => stderr.push(chunk.toString()));
  const exited = once(child, 'exit').then(([code, signal]) => ({
    code: code as number | null,
    signal: signal as NodeJS.Signals | null,
  }));
  return {
    lines,
    stdout,
    stderr,
    exited,
    waitForLog: (msg) => {
      const found = lines.find((line) => line.msg === msg);
      if (found) return Promise.resolve(found);
      return new Promise<LogLine>((resolve, reject) => {
        waiters.push({ msg, resolve });
        void exited.then(({ code, signal }) => {
          reject(
            new Error(
              `collector exited (${signal ?? String(code)}) before logging "${msg}": ${stderr.join('')}`,
            ),
          );
        });
      });
    },
    kill: (signal) => child.kill(signal),
  };
}

async function readyzStatus(port: number): Promise<number> {
  try {
    const response = await fetch(`http://127.0.0.1:${port}/readyz?verbose`);
    await response.text();
    return response.status;
  } catch {
    return 0;
  }
}

describe('collector process', () => {
  let kubeconfigPath: string;
  let clusterUid: string;
  const cleanups: (() => Promise<void> | void)[] = [];

  beforeAll(async () => {
    kubeconfigPath = inject('kubeconfigPath');
    const namespace = await loadKubeConfig(kubeconfigPath)
      .makeApiClient(CoreV1Api)
      .readNamespace({ name: 'kube-system' });
    clusterUid = namespace.metadata?.uid ?? '';
    expect(clusterUid).not.toBe('');
  });

  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  async function setup(options: DemoGatewayOptions, extraConfig: string[] = []) {
    const gateway = new DemoGateway(options, { logger: pino({ level: 'silent' }) });
    const port = await gateway.listen('127.0.0.1', 0);
    cleanups.push(() => gateway.close());
    const dir = mkdtempSync(join(tmpdir(), 'kubexa-collector-process-'));
    cleanups.push(() => {
      rmSync(dir, { recursive: true, force: true });
    });
    const dataDir = join(dir, 'data');
    const configPath = join(dir, 'config.yaml');
    writeFileSync(
      configPath,
      [
        'gateway:',
        `  address: 127.0.0.1:${port}`,
        '  tls: false',
        '  reconnect_initial_delay: 200ms',
        '  reconnect_max_delay: 1s',
        'buffer:',
        `  spill_dir: ${JSON.stringify(dataDir)}`,
        'observability:',
        '  health_addr: "127.0.0.1:0"',
        '  metrics_addr: "127.0.0.1:0"',
        ...extraConfig,
        '',
      ].join('\n'),
    );
    const run = (token: string): CollectorProcess => {
      const collector = startCollector(configPath, {
        KUBECONFIG: kubeconfigPath,
        KUBEXA_TENANT_TOKEN: token,
      });
      cleanups.push(async () => {
        collector.kill('SIGKILL');
        await collector.exited;
      });
      return collector;
    };
    return { gateway, dataDir, run };
  }

  it('handshakes with the kube-system UID, becomes ready, exits 0 on SIGTERM, keeps its agent id', async () => {
    const { gateway, dataDir, run } = await setup({ acceptToken: TOKEN });

    const first = run(TOKEN);
    const session = await gateway.waitForSession();
    expect(session.clusterId).toBe(clusterUid);
    const agentId = readFileSync(join(dataDir, AGENT_ID_FILE), 'utf8').trim();
    expect(session.agentId).toBe(agentId);

    const started = await first.waitForLog('collector started');
    const healthPort = (started['ports'] as { health: number }).health;
    let status = 0;
    for (let i = 0; i < 300 && status !== 200; i++) {
      status = await readyzStatus(healthPort);
      if (status !== 200) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(status).toBe(200);
    const verbose = (await (
      await fetch(`http://127.0.0.1:${healthPort}/readyz?verbose`)
    ).json()) as { components: Record<string, { status: string; reason: string | null }> };
    expect(verbose.components).toMatchObject({
      lifecycle: { status: 'ok' },
      gateway: { status: 'ok', reason: null },
      queue: { status: 'ok' },
      kubernetes: { status: 'ok' },
    });

    first.kill('SIGTERM');
    expect(await first.exited).toEqual({ code: 0, signal: null });
    expect(first.lines.map((line) => line.msg)).toContain('collector stopped');
    expect(first.stdout.join('\n')).not.toContain(TOKEN);

    // A restart on the same data directory reports the same agent id.
    const second = run(TOKEN);
    const again = await gateway.waitForSession(
      (s) => s.state === 'connected' && s.sessionId !== session.sessionId,
    );
    expect(again).toMatchObject({ agentId, clusterId: clusterUid });
    second.kill('SIGTERM');
    expect(await second.exited).toEqual({ code: 0, signal: null });
  });

  it('ships pod log lines to the gateway exactly once and applies ingest rules from a ConfigUpdate live', async () => {
    const kc = loadKubeConfig(kubeconfigPath);
    const namespace = await createTestNamespace(kc, 'e2e-logs');
    cleanups.push(() => namespace.delete());
    const logDir = mkdtempSync(join(tmpdir(), 'kubexa-e2e-logs-'));
    cleanups.push(() => {
      rmSync(logDir, { recursive: true, force: true });
    });
    const logsFile = join(logDir, 'app.log');
    writeFileSync(logsFile, criLine(new Date(Date.now() - 1000), 'e2e line 0'));
    await serveLogsFromFile(kc, { namespace: namespace.name, logsFile });
    await kc.makeApiClient(CoreV1Api).createNamespacedPod({
      namespace: namespace.name,
      body: {
        metadata: { name: 'app', labels: { app: 'e2e' } },
        spec: { containers: [{ name: 'main', image: 'registry.invalid/app:1' }] },
      },
    });
    const checkpoints = join(logDir, 'checkpoints');
    const { gateway, run } = await setup({ acceptToken: TOKEN }, [
      'collect:',
      '  logs:',
      `    checkpoint_dir: ${JSON.stringify(checkpoints)}`,
      '    rules:',
      `      - namespace: ${namespace.name}`,
    ]);
    const collector = run(TOKEN);
    const session = await gateway.waitForSession();
    const at = new Date();
    for (let i = 1; i <= 5; i++) appendFileSync(logsFile, criLine(at, `e2e line ${String(i)}`));

    const received = await eventually(
      'all six lines at the gateway',
      () => {
        const lines = gateway.store
          .payloads('logs')
          .map((bytes) => AgentMessage.decode(bytes))
          .flatMap((message) =>
            message.payload?.$case === 'logs' ? message.payload.value.entries : [],
          );
        return Promise.resolve(lines.length >= 6 ? lines : undefined);
      },
      { timeoutMs: 60_000, intervalMs: 500 },
    );
    expect(received.map((entry) => entry.message)).toEqual([
      'e2e line 0',
      'e2e line 1',
      'e2e line 2',
      'e2e line 3',
      'e2e line 4',
      'e2e line 5',
    ]);
    expect(received[0]).toMatchObject({
      namespace: namespace.name,
      podName: 'app',
      container: 'main',
    });
    expect(gateway.store.duplicates).toBe(0);

    // A ConfigUpdate's ingest rules apply to the open stream without a restart.
    const update = ConfigUpdate.fromPartial({
      configVersion: 'ingest-1',
      config: { ingestRules: { maxLineBytes: '16' } },
    });
    expect(gateway.sendConfigUpdate(session.sessionId, update)).toBe(true);
    await collector.waitForLog('ingest limits updated');
    appendFileSync(logsFile, criLine(new Date(), 'e2e line 6 is longer than sixteen bytes'));
    const cut = await eventually(
      'the long line, truncated',
      () => {
        const entries = gateway.store
          .payloads('logs')
          .map((bytes) => AgentMessage.decode(bytes))
          .flatMap((message) =>
            message.payload?.$case === 'logs' ? message.payload.value.entries : [],
          );
        return Promise.resolve(entries.find((entry) => entry.message.startsWith('e2e line 6')));
      },
      { timeoutMs: 30_000, intervalMs: 500 },
    );
    expect(cut).toMatchObject({ message: 'e2e line 6 is lo', truncated: true });
    collector.kill('SIGTERM');
    expect(await collector.exited).toEqual({ code: 0, signal: null });
  });

  it('starts on a damaged pod-logs.db and buffer.db: moves both aside, says so, becomes ready', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kubexa-damaged-'));
    cleanups.push(() => {
      rmSync(dir, { recursive: true, force: true });
    });
    const checkpoints = join(dir, 'checkpoints');
    const { gateway, dataDir, run } = await setup({ acceptToken: TOKEN }, [
      'collect:',
      '  logs:',
      `    checkpoint_dir: ${JSON.stringify(checkpoints)}`,
      '    rules:',
      '      - namespace: no-such-namespace',
    ]);
    mkdirSync(checkpoints, { recursive: true });
    mkdirSync(dataDir, { recursive: true });
    writeFileSync(join(checkpoints, 'pod-logs.db'), 'not a database, '.repeat(500));
    writeFileSync(join(dataDir, 'buffer.db'), 'not a database either, '.repeat(500));

    const collector = run(TOKEN);
    // Before the shared policy, the start failed here on SQLITE_NOTADB.
    const started = await collector.waitForLog('collector started');
    await gateway.waitForSession();
    const healthPort = (started['ports'] as { health: number }).health;
    let status = 0;
    for (let i = 0; i < 300 && status !== 200; i++) {
      status = await readyzStatus(healthPort);
      if (status !== 200) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(status).toBe(200);
    const messages = collector.lines.map((line) => line.msg);
    expect(messages).toContainEqual(
      expect.stringMatching(/^checkpoint database unreadable .*damaged file moved aside$/),
    );
    expect(messages).toContainEqual(
      expect.stringMatching(/^spill database unreadable .*damaged file moved aside$/),
    );
    expect(
      readdirSync(checkpoints).filter((f) => f.startsWith('pod-logs.db.corrupt-')),
    ).toHaveLength(1);
    expect(readdirSync(dataDir).filter((f) => f.startsWith('buffer.db.corrupt-'))).toHaveLength(1);
    collector.kill('SIGTERM');
    expect(await collector.exited).toEqual({ code: 0, signal: null });
  });

  it('exits non-zero with what to fix when the gateway answers UNAUTHENTICATED', async () => {
    const { run } = await setup({ acceptToken: TOKEN, tokenFailure: 'unauthenticated' });
    const collector = run(WRONG_TOKEN);
    const { code } = await collector.exited;
    expect(code).not.toBe(0);
    const stderr = collector.stderr.join('');
    expect(stderr).toContain('UNAUTHENTICATED');
    expect(stderr).toContain('KUBEXA_TENANT_TOKEN');
    expect(stderr).toContain('ERR_GATEWAY_UNAUTHENTICATED');
    expect(stderr + collector.stdout.join('\n')).not.toContain(WRONG_TOKEN);
  });

  it('retries the cluster id while the API server is unreachable, then exits 1 saying what to check', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kubexa-collector-unreachable-'));
    cleanups.push(() => {
      rmSync(dir, { recursive: true, force: true });
    });
    const kubeconfig = join(dir, 'kubeconfig.yaml');
    // Port 1 on loopback: connection refused at once, every attempt.
    writeFileSync(
      kubeconfig,
      [
        'apiVersion: v1',
        'kind: Config',
        'clusters: [{name: c, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}]',
        'users: [{name: u, user: {token: t}}]',
        'contexts: [{name: x, context: {cluster: c, user: u}}]',
        'current-context: x',
        '',
      ].join('\n'),
    );
    const configPath = join(dir, 'config.yaml');
    writeFileSync(configPath, 'gateway:\n  address: 127.0.0.1:9\n  tls: false\n');
    const collector = startCollector(configPath, {
      KUBECONFIG: kubeconfig,
      KUBEXA_TENANT_TOKEN: TOKEN,
    });
    const { code } = await collector.exited;
    expect(code).toBe(1);
    const retries = collector.lines.filter(
      (line) => line.msg === 'cannot read the cluster id yet; retrying',
    );
    expect(retries.map((line) => line['attempt'])).toEqual([1, 2, 3, 4]);
    expect(collector.stderr.join('')).toContain('cannot read the kube-system namespace');
  });

  it('prints every config problem and exits 1', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kubexa-collector-config-'));
    cleanups.push(() => {
      rmSync(dir, { recursive: true, force: true });
    });
    const configPath = join(dir, 'config.yaml');
    writeFileSync(configPath, 'gateway:\n  dial_timeout: 30\nbuffer:\n  batch_size: 0\n');
    const collector = startCollector(configPath, { KUBECONFIG: kubeconfigPath });
    const { code } = await collector.exited;
    expect(code).toBe(1);
    const stderr = collector.stderr.join('');
    expect(stderr).toContain('gateway.dial_timeout');
    expect(stderr).toContain('buffer.batch_size');
    expect(stderr).toContain('agent.tenant_token');
  });
});
