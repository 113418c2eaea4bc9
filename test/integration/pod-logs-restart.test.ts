// The pod log collector killed mid-stream: a child process (test/fixtures/pod-log-collector.ts:
// pod log source with checkpoints -> DurableBuffer -> GatewayStream) follows two containers whose
// log gets uniquely numbered lines, four per millisecond timestamp, every 30 ms. It is SIGKILLed,
// restarted on the same data directory, SIGTERMed, restarted again. The demo gateway (in this
// process, deduplicating by message_id) must hold every line once, in order, per container.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { appendFile, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { CoreV1Api } from '@kubernetes/client-node';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { DemoGateway } from '../../demo-gateway/demo-gateway.js';
import { AgentMessage } from '../../proto/index.js';
import {
  createTestNamespace,
  criLine,
  eventually,
  loadKubeConfig,
  serveLogsFromFile,
  type TestNamespace,
  waitForRunningPods,
} from '../helpers/kube.js';
import { steadyWriter } from '../helpers/wait.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const collectorScript = join(root, 'test', 'fixtures', 'pod-log-collector.ts');
const kubeconfigPath = inject('kubeconfigPath');
const kc = loadKubeConfig(kubeconfigPath);
const core = kc.makeApiClient(CoreV1Api);
const logger = pino({ level: 'silent' });
const CONTAINERS = ['one/app', 'two/app'];

let ns: TestNamespace;
let scratch: string;
let logsFile: string;
let gateway: DemoGateway;
let port: number;

beforeAll(async () => {
  ns = await createTestNamespace(kc, 'podlogs-kill');
  scratch = await mkdtemp(join(tmpdir(), 'kubexa-podlogs-kill-'));
  logsFile = join(scratch, 'app.log');
  await writeFile(logsFile, '');
  await serveLogsFromFile(kc, { namespace: ns.name, logsFile });
  for (const name of ['one', 'two']) {
    await core.createNamespacedPod({
      namespace: ns.name,
      body: {
        metadata: { name },
        spec: {
          containers: [{ name: 'app', image: 'registry.invalid/app:1' }],
          tolerations: [{ key: 'kwok.x-k8s.io/node', operator: 'Exists', effect: 'NoSchedule' }],
        },
      },
    });
  }
  await waitForRunningPods(kc, ns.name, 2);
  gateway = new DemoGateway({}, { logger });
  port = await gateway.listen('127.0.0.1', 0);
});

afterAll(async () => {
  await gateway.close();
  await ns.delete();
  await rm(scratch, { recursive: true, force: true });
});

/** The collector child; its stdout is JSON reports. */
function startCollector(dir: string) {
  const child: ChildProcess = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      collectorScript,
      '--kubeconfig',
      kubeconfigPath,
      '--namespace',
      ns.name,
      '--dir',
      dir,
      '--address',
      `127.0.0.1:${String(port)}`,
    ],
    { cwd: root, stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const lines: string[] = [];
  if (child.stdout) createInterface({ input: child.stdout }).on('line', (l) => lines.push(l));
  const exited = once(child, 'exit').then(([code, signal]) => ({
    code: code as number | null,
    signal: signal as NodeJS.Signals | null,
  }));
  return { child, lines, exited };
}

/** Numbers of the lines stored at the gateway, per `<pod>/<container>`, in arrival order. */
function storedLines(): Map<string, number[]> {
  const byContainer = new Map<string, number[]>();
  for (const payload of gateway.store.payloads('logs')) {
    const message = AgentMessage.decode(payload);
    if (message.payload?.$case !== 'logs') continue;
    for (const entry of message.payload.value.entries) {
      const key = `${entry.podName}/${entry.container}`;
      const list = byContainer.get(key) ?? [];
      list.push(Number(entry.raw.toString().replace(/^n-/, '')));
      byContainer.set(key, list);
    }
  }
  return byContainer;
}

let written = 0;
/** Appends 4 lines with one millisecond timestamp. */
async function appendFour(): Promise<void> {
  const at = new Date();
  let text = '';
  for (let i = 0; i < 4; i++) text += criLine(at, `n-${String(written++)}`);
  await appendFile(logsFile, text);
}

/** Resolves once every container's stored lines reach `n`. */
function reached(n: number) {
  return () =>
    Promise.resolve(CONTAINERS.every((c) => (storedLines().get(c) ?? []).includes(n)) || undefined);
}

describe('pod log collector process', () => {
  it('SIGKILL and SIGTERM mid-stream: every line at the gateway exactly once, in order per container', async () => {
    const dir = await mkdtemp(join(scratch, 'data-'));
    const writer = steadyWriter(appendFour);
    const children: ReturnType<typeof startCollector>[] = [];
    try {
      // 1: runs, then SIGKILL while lines keep coming.
      const a = startCollector(dir);
      children.push(a);
      await eventually('run 1 to deliver', reached(written + 40), { timeoutMs: 60_000 });
      a.child.kill('SIGKILL');
      expect((await a.exited).signal).toBe('SIGKILL');
      // 2: restarts on the same directory, catches up, then SIGTERM: closes cleanly.
      const b = startCollector(dir);
      children.push(b);
      await eventually('run 2 to deliver', reached(written + 40), { timeoutMs: 60_000 });
      b.child.kill('SIGTERM');
      expect(await b.exited).toEqual({ code: 0, signal: null });
      expect(b.lines.at(-1)).toContain('"stopped":true');
      // 3: restarts again, SIGKILLed right after its first delivery of new lines.
      const c = startCollector(dir);
      children.push(c);
      await eventually('run 3 to deliver', reached(written + 8), { timeoutMs: 60_000 });
      c.child.kill('SIGKILL');
      await c.exited;
      // 4: runs to the end of the log.
      const d = startCollector(dir);
      children.push(d);
      await eventually('run 4 to deliver', reached(written + 40), { timeoutMs: 60_000 });
      await writer.stop();
      const last = written - 1;
      await eventually('every line written', reached(last), { timeoutMs: 60_000 });
      d.child.kill('SIGTERM');
      expect(await d.exited).toEqual({ code: 0, signal: null });
      const stored = storedLines();
      expect([...stored.keys()].sort()).toEqual(CONTAINERS);
      for (const container of CONTAINERS) {
        expect(stored.get(container)).toEqual(Array.from({ length: last + 1 }, (_, i) => i));
      }
      expect(last).toBeGreaterThan(300);
    } finally {
      await writer.stop();
      for (const { child } of children) if (child.exitCode === null) child.kill('SIGKILL');
    }
  });
});
