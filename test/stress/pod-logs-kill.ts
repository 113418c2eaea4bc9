// The exactly-once stress test of the pod log path: the collector's log path in a child process
// (test/fixtures/pod-log-collector.ts: pod log source with checkpoints -> DurableBuffer ->
// GatewayStream) follows two containers against the real API server harness, shipping to an
// in-process demo gateway with acks on, and is SIGKILLed again and again at random points of its
// flush cycle (from its start, through the replay after a restart, to a steady follow). A writer
// appends to the containers' log all the while: uniquely numbered lines (several per timestamp),
// multi-line records (an exception with frames), blank lines, lines longer than the rate limit's
// burst (always refused), and pauses longer than the joiner's hold (idle flushes). At the end a
// last collector catches up and stops cleanly, and the gateway's store is read line by line:
//   duplicates: a written line stored more than once, under any message id;
//   losses:     a line that must arrive (not blank, not refused) stored nowhere;
//   leaks:      a refused line stored anyway.
// Zero of each is the bar. `npm run stress:pod-logs -- --kills 300` runs it on its own cluster;
// test/integration/pod-logs-stress.test.ts runs it with a small count on the suite's cluster.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { appendFile, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { CoreV1Api } from '@kubernetes/client-node';
import { pino } from 'pino';
import { DemoGateway } from '../../demo-gateway/demo-gateway.js';
import { AgentMessage } from '../../proto/index.js';
import {
  createTestNamespace,
  criLine,
  eventually,
  loadKubeConfig,
  serveLogsFromFile,
  waitForRunningPods,
} from '../helpers/kube.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const collectorScript = join(root, 'test', 'fixtures', 'pod-log-collector.ts');
const PODS = ['one', 'two'];

/**
 * The rate limit: a burst larger than anything the collector reads in one millisecond (a
 * replay's backlog comes in 16-64 KiB chunks; the rate refills the whole burst every
 * millisecond), so only lines longer than the burst are refused, on every read alike.
 */
const BURST_BYTES = 200_000;
const RATE_BYTES_PER_SECOND = 1_000_000_000;
const OVER_BURST_BYTES = 220_000;
/** The writer's rhythm: one tick every TICK_MS; a record, a blank, a refused line, a pause. */
const TICK_MS = 20;
const MULTILINE_EVERY = 7;
const BLANK_EVERY = 5;
const OVER_BURST_EVERY = 250;
const PAUSE_EVERY = 400;
/** Longer than the joiner's 2 s hold: the record before it goes out by the idle flush. */
const PAUSE_MS = 2_500;

export interface PodLogKillOptions {
  readonly kubeconfigPath: string;
  readonly kills: number;
  /** A kill lands this long (uniformly at random, up to) after the child's first report. */
  readonly maxKillDelayMs?: number;
  /** The source's flush interval in the child (the collector's default is 250 ms). */
  readonly flushIntervalMs?: number;
  /** Working directory (logs, data); removed at the end. */
  readonly scratch: string;
  /** Progress lines (one per 10 kills), e.g. to stdout. */
  readonly progress?: (line: string) => void;
  /** For a reproducible kill schedule. */
  readonly seed?: number;
}

export interface PodLogKillResult {
  readonly kills: number;
  readonly containers: number;
  /** Lines written that must arrive once per container (not blank, not refused). */
  readonly linesExpected: number;
  /** Line occurrences stored at the gateway, over all containers. */
  readonly linesStored: number;
  readonly duplicates: number;
  readonly losses: number;
  readonly leaks: number;
  readonly multilineRecords: number;
  readonly blankLines: number;
  readonly refusedLines: number;
  readonly idlePauses: number;
  readonly messagesStored: number;
  /** Messages the gateway dropped as already stored (re-sent under the same id). */
  readonly resendsDeduplicated: number;
  readonly durationMs: number;
  readonly phases: KillPhases;
  /** Up to 10 examples per kind, for the report. */
  readonly examples: { duplicates: string[]; losses: string[]; leaks: string[] };
}

/** A small deterministic PRNG (mulberry32), so a seed reproduces a kill schedule. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** What the writer wrote: every numbered line, and which ones must arrive. */
interface Written {
  next: number;
  expected: Set<number>;
  refused: Set<number>;
  multiline: number;
  blank: number;
  pauses: number;
}

/** One tick of the writer: the text to append (CRI lines), recording what it numbers. */
function tick(n: number, written: Written): string {
  const at = new Date();
  const number = (): string => {
    const id = written.next++;
    written.expected.add(id);
    return `s-${String(id)}`;
  };
  let text = '';
  for (let i = 0; i < 3; i++) text += criLine(at, `${number()} plain`);
  if (n % MULTILINE_EVERY === 0) {
    written.multiline++;
    text += criLine(at, `java.lang.IllegalStateException: ${number()}`);
    text += criLine(at, `\tat com.example.App.run(${number()})`);
    text += criLine(at, `\tat com.example.Main.main(${number()})`);
    text += criLine(at, `Caused by: java.io.IOException: ${number()}`);
  }
  if (n % BLANK_EVERY === 0) {
    written.blank++;
    text += criLine(at, '');
  }
  if (n % OVER_BURST_EVERY === OVER_BURST_EVERY - 1) {
    const id = written.next++;
    written.refused.add(id);
    text += criLine(at, `s-${String(id)} ${'x'.repeat(OVER_BURST_BYTES)}`);
  }
  if (n % PAUSE_EVERY === PAUSE_EVERY - 1) {
    // A record that may go on (an exception line) right before a pause: only the joiner's
    // idle flush emits it.
    written.pauses++;
    text += criLine(at, `java.lang.RuntimeException: ${number()}`);
  }
  return text;
}

function startWriter(logsFile: string, written: Written) {
  const writing = new AbortController();
  const done = (async () => {
    for (let n = 1; !writing.signal.aborted; n++) {
      await appendFile(logsFile, tick(n, written));
      const pause = n % PAUSE_EVERY === PAUSE_EVERY - 1 ? PAUSE_MS : TICK_MS;
      await sleep(pause, undefined, { signal: writing.signal }).catch(() => undefined);
    }
  })();
  return {
    async stop(): Promise<void> {
      writing.abort();
      await done;
    },
  };
}

interface Child {
  readonly child: ChildProcess;
  readonly lines: string[];
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** The fixture's report line (every 100 ms): streams open, batches unreleased, items acked. */
interface Report {
  readonly active: number;
  readonly unreleased: number;
  readonly settled: number;
}

function latestReport(run: Child): Report | undefined {
  const line = run.lines.at(-1);
  return line === undefined ? undefined : (JSON.parse(line) as Report);
}

/** Waits (up to 30 s) until the child's report satisfies `ready`, or the child exits. */
async function whenReported(run: Child, ready: (report: Report) => boolean): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (run.child.exitCode === null && run.child.signalCode === null && Date.now() < deadline) {
    const report = latestReport(run);
    if (report && ready(report)) return;
    await sleep(20);
  }
}

/** Where the kills landed: while starting, with streams open (replay, follow), after acks. */
export interface KillPhases {
  starting: number;
  streaming: number;
  acked: number;
}

/** Counts, per container, how often each numbered line is stored at the gateway. */
function storedCounts(gateway: DemoGateway): Map<string, Map<number, number>> {
  const byContainer = new Map<string, Map<number, number>>();
  for (const payload of gateway.store.payloads('logs')) {
    const message = AgentMessage.decode(payload);
    if (message.payload?.$case !== 'logs') continue;
    for (const entry of message.payload.value.entries) {
      const key = `${entry.podName}/${entry.container}`;
      const counts = byContainer.get(key) ?? new Map<number, number>();
      byContainer.set(key, counts);
      for (const match of Buffer.from(entry.raw)
        .toString()
        .matchAll(/s-(\d+)/g)) {
        const id = Number(match[1]);
        counts.set(id, (counts.get(id) ?? 0) + 1);
      }
    }
  }
  return byContainer;
}

/** Runs the stress test; resolves with the figures (it does not judge them). */
export async function runPodLogKillStress(options: PodLogKillOptions): Promise<PodLogKillResult> {
  const started = Date.now();
  const rand = random(options.seed ?? Date.now());
  const kc = loadKubeConfig(options.kubeconfigPath);
  const core = kc.makeApiClient(CoreV1Api);
  const logger = pino({ level: 'silent' });
  const scratch = await mkdtemp(join(options.scratch, 'pod-log-kill-'));
  const logsFile = join(scratch, 'app.log');
  const dataDir = join(scratch, 'data');
  await writeFile(logsFile, '');
  const ns = await createTestNamespace(kc, 'podlogs-stress');
  const gateway = new DemoGateway({}, { logger });
  const children: Child[] = [];
  const written: Written = {
    next: 0,
    expected: new Set(),
    refused: new Set(),
    multiline: 0,
    blank: 0,
    pauses: 0,
  };
  const writer = startWriter(logsFile, written);
  try {
    await serveLogsFromFile(kc, { namespace: ns.name, logsFile });
    for (const name of PODS) {
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
    await waitForRunningPods(kc, ns.name, PODS.length);
    const port = await gateway.listen('127.0.0.1', 0);

    const startCollector = (): Child => {
      const child = spawn(
        process.execPath,
        [
          '--import',
          'tsx',
          collectorScript,
          '--kubeconfig',
          options.kubeconfigPath,
          '--namespace',
          ns.name,
          '--dir',
          dataDir,
          '--address',
          `127.0.0.1:${String(port)}`,
          '--flush-ms',
          String(options.flushIntervalMs ?? 250),
          '--rate',
          String(RATE_BYTES_PER_SECOND),
          '--burst',
          String(BURST_BYTES),
        ],
        { cwd: root, stdio: ['ignore', 'pipe', 'inherit'] },
      );
      const lines: string[] = [];
      createInterface({ input: child.stdout }).on('line', (line) => {
        if (line.startsWith('{')) lines.push(line);
      });
      const exited = once(child, 'exit').then(([code, signal]) => ({
        code: code as number | null,
        signal: signal as NodeJS.Signals | null,
      }));
      const run = { child, lines, exited };
      children.push(run);
      return run;
    };

    const maxDelay = options.maxKillDelayMs ?? 1_500;
    const phases: KillPhases = { starting: 0, streaming: 0, acked: 0 };
    for (let kill = 1; kill <= options.kills; kill++) {
      const run = startCollector();
      // One kill in eight lands while the child starts; three in eight once its streams are
      // open (the replay of the last run's intents, then the follow); half once the gateway
      // has acked batches of this run (releases, checkpoint flushes). Then a random delay of
      // up to six flush cycles puts each kill anywhere in the cycle.
      const phase = rand();
      if (phase < 0.125) phases.starting++;
      else if (phase < 0.5) {
        phases.streaming++;
        await whenReported(run, (r) => r.active > 0);
      } else {
        phases.acked++;
        await whenReported(run, (r) => r.settled > 0);
      }
      await sleep(Math.floor(rand() * maxDelay));
      run.child.kill('SIGKILL');
      const exit = await run.exited;
      if (exit.signal !== 'SIGKILL') {
        throw new Error(`collector run ${String(kill)} exited on its own: ${JSON.stringify(exit)}`);
      }
      if (kill % 10 === 0) {
        options.progress?.(
          `${String(kill)}/${String(options.kills)} kills, ${String(written.next)} lines written, ${String(gateway.store.count('logs'))} messages stored`,
        );
      }
    }
    await writer.stop();

    // The last run catches up with everything written, then stops cleanly.
    const last = startCollector();
    const lastId = written.next - 1;
    const expected = [...written.expected];
    const caughtUp = (): boolean => {
      const stored = storedCounts(gateway);
      return PODS.every((pod) => {
        const counts = stored.get(`${pod}/app`);
        return counts !== undefined && expected.every((id) => counts.has(id));
      });
    };
    await eventually(
      `every line up to s-${String(lastId)} stored for every container`,
      () => Promise.resolve(caughtUp() || undefined),
      { timeoutMs: 120_000, intervalMs: 1_000 },
    ).catch(() => undefined); // what is missing is counted as lost below
    // A moment for anything late (a duplicate would come now), then a clean stop.
    await sleep(2_000);
    last.child.kill('SIGTERM');
    const exit = await last.exited;
    if (exit.code !== 0)
      throw new Error(`the last collector run ended with ${JSON.stringify(exit)}`);

    const stored = storedCounts(gateway);
    const examples = { duplicates: [] as string[], losses: [] as string[], leaks: [] as string[] };
    const note = (list: string[], text: string): void => {
      if (list.length < 10) list.push(text);
    };
    let duplicates = 0;
    let losses = 0;
    let leaks = 0;
    let linesStored = 0;
    for (const pod of PODS) {
      const counts = stored.get(`${pod}/app`) ?? new Map<number, number>();
      for (const [id, count] of counts) {
        linesStored += count;
        if (written.refused.has(id)) {
          leaks += count;
          note(examples.leaks, `${pod}/app s-${String(id)}`);
        } else if (count > 1) {
          duplicates += count - 1;
          note(examples.duplicates, `${pod}/app s-${String(id)} x${String(count)}`);
        }
      }
      for (const id of expected) {
        if (counts.has(id)) continue;
        losses++;
        note(examples.losses, `${pod}/app s-${String(id)}`);
      }
    }
    return {
      kills: options.kills,
      containers: PODS.length,
      linesExpected: expected.length,
      linesStored,
      duplicates,
      losses,
      leaks,
      multilineRecords: written.multiline,
      blankLines: written.blank,
      refusedLines: written.refused.size,
      idlePauses: written.pauses,
      messagesStored: gateway.store.count('logs'),
      resendsDeduplicated: gateway.store.duplicates,
      durationMs: Date.now() - started,
      phases,
      examples,
    };
  } finally {
    await writer.stop();
    for (const { child } of children) if (child.exitCode === null) child.kill('SIGKILL');
    await gateway.close();
    await ns.delete();
    await rm(scratch, { recursive: true, force: true });
  }
}
