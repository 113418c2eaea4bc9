// Collector CPU and RSS while scraping 200 Prometheus targets every 15 s (issue 18), beside a
// baseline measured in the same run, at the same time, against the same targets: a bare fetch
// loop that GETs each page and reads its body at the same interval, and nothing else.
//
// Definition (fixed before measuring): one process serves the 200 targets on loopback (200
// ports, a ~14 KB page of ~120 series each). The collector side is the metrics source as the
// collector wires it (custom_endpoints, its HTTP client, parser, filters, family JSON and
// AgentMessage encoding, self-metrics) with a sink that counts the encoded items, in its own
// Node process; the baseline is a second Node process started the same way (`node --import tsx`).
// After WARMUP_MS (every target's first scrape is within one interval of the start), the user +
// system CPU of each process over MEASURE_MS is reported as % of one core, and VmRSS at the end
// as MiB. The issue names no target: the figures are reported.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import type { BenchCase, BenchResult } from '../types.js';

const TARGETS = 200;
const INTERVAL_MS = 15_000;
const WARMUP_MS = 20_000;
const MEASURE_MS = 60_000;
const CLOCK_TICKS = 100;
const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const CHILD = join(root, 'bench', 'cases', 'prometheus-targets-child.ts');

function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${String(pid)}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
}

function rssMiB(pid: number): number {
  const status = readFileSync(`/proc/${String(pid)}/status`, 'utf8');
  const kib = /^VmRSS:\s+(\d+) kB/m.exec(status)?.[1];
  if (kib === undefined) throw new Error(`no VmRSS for pid ${String(pid)}`);
  return Number(kib) / 1024;
}

interface Child {
  readonly process: ChildProcess;
  readonly pid: number;
  /** The last `scrapes <n> items <n>` line. */
  counts(): { scrapes: number; items: number };
  readonly firstLine: Promise<string>;
}

const children = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of children) child.kill('SIGKILL');
});

function start(args: readonly string[]): Child {
  const child = spawn(process.execPath, ['--import', 'tsx', CHILD, ...args], {
    cwd: root,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  if (child.pid === undefined) throw new Error(`${args.join(' ')}: did not start`);
  children.add(child);
  void once(child, 'exit').then(() => children.delete(child));
  let last = { scrapes: 0, items: 0 };
  const lines = createInterface({ input: child.stdout });
  const firstLine = new Promise<string>((resolve, reject) => {
    lines.once('line', resolve);
    child.once('exit', (code) => {
      reject(new Error(`${args.join(' ')} exited with ${String(code)}`));
    });
  });
  firstLine.catch(() => undefined);
  lines.on('line', (line) => {
    const match = /^scrapes (\d+) items (\d+)$/.exec(line);
    if (match) last = { scrapes: Number(match[1]), items: Number(match[2]) };
  });
  return { process: child, pid: child.pid, counts: () => last, firstLine };
}

async function stop(child: Child): Promise<void> {
  if (child.process.exitCode !== null || child.process.signalCode !== null) return;
  const gone = once(child.process, 'exit');
  child.process.kill('SIGTERM');
  await gone;
}

export const prometheusTargetsBench: BenchCase = {
  name: 'prometheus-targets',
  async run({ dir, log }) {
    const server = start(['serve', String(TARGETS)]);
    const started: Child[] = [server];
    try {
      const urls = JSON.parse(await server.firstLine) as string[];
      const planPath = join(dir, 'plan.json');
      writeFileSync(planPath, JSON.stringify({ urls, intervalMs: INTERVAL_MS }));
      log(`${String(urls.length)} targets on loopback, every ${String(INTERVAL_MS / 1000)} s`);
      const collector = start(['collector', planPath]);
      const baseline = start(['fetch', planPath]);
      started.push(collector, baseline);
      await sleep(WARMUP_MS);
      const before = {
        collector: { cpu: cpuSeconds(collector.pid), ...collector.counts() },
        baseline: { cpu: cpuSeconds(baseline.pid), ...baseline.counts() },
        at: performance.now(),
      };
      await sleep(MEASURE_MS);
      const seconds = (performance.now() - before.at) / 1000;
      const share = (child: Child, cpu: number) => ((cpuSeconds(child.pid) - cpu) / seconds) * 100;
      const collectorCpu = share(collector, before.collector.cpu);
      const baselineCpu = share(baseline, before.baseline.cpu);
      const collectorRss = rssMiB(collector.pid);
      const baselineRss = rssMiB(baseline.pid);
      const scrapes = collector.counts().scrapes - before.collector.scrapes;
      const fetched = baseline.counts().scrapes - before.baseline.scrapes;
      const families = collector.counts().items - before.collector.items;
      log(
        `collector: ${collectorCpu.toFixed(1)} % core, ${collectorRss.toFixed(1)} MiB RSS, ${String(scrapes)} scrapes and ${String(families)} family events in ${seconds.toFixed(0)} s`,
      );
      log(
        `fetch loop: ${baselineCpu.toFixed(1)} % core, ${baselineRss.toFixed(1)} MiB RSS, ${String(fetched)} fetches in ${seconds.toFixed(0)} s`,
      );
      const expected = Math.floor((TARGETS * MEASURE_MS) / INTERVAL_MS);
      log(
        `scrapes in the window: collector ${String(scrapes)}, fetch loop ${String(fetched)}, schedule ${String(expected)} (a starved machine falls behind both)`,
      );
      // The figures mean nothing unless both did most of the work (4 scrapes per target).
      if (scrapes < expected / 2 || fetched < expected / 2) {
        throw new Error(
          `too few scrapes in the window (collector ${String(scrapes)}, baseline ${String(fetched)}, expected ~${String(expected)})`,
        );
      }
      const results: BenchResult[] = [
        {
          name: 'CPU scraping 200 targets / 15 s',
          itemsPerSecond: collectorCpu,
          baselineName: 'bare fetch loop of the same targets',
          baselineItemsPerSecond: baselineCpu,
          unit: '% core',
        },
        {
          name: 'RSS scraping 200 targets / 15 s',
          itemsPerSecond: collectorRss,
          baselineName: 'bare fetch loop of the same targets',
          baselineItemsPerSecond: baselineRss,
          unit: 'MiB',
        },
      ];
      return results;
    } finally {
      for (const child of started.reverse()) await stop(child);
    }
  },
};
