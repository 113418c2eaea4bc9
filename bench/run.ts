// `npm run bench`: runs every case in CASES, prints each figure beside its same-run baseline
// and the ratio, and exits non-zero if a target is missed. Each case's figures and detail lines
// go to bench/results/<case>.json, from which `npm run bench:readme` writes the README's table;
// the table is printed at the end too. Bounded: the whole run is aborted after RUN_LIMIT_MS.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { bufferBench } from './cases/buffer.js';
import { consoleRoundTripBench } from './cases/console-round-trip.js';
import { demoLogQueryBench } from './cases/demo-log-query.js';
import { footprintBench } from './cases/footprint.js';
import { podLogsE2eBench } from './cases/pod-logs-e2e.js';
import { podLogsBench } from './cases/pod-logs.js';
import { queryBench } from './cases/query.js';
import { prometheusParseBench } from './cases/prometheus-parse.js';
import { prometheusTargetsBench } from './cases/prometheus-targets.js';
import { streamBench } from './cases/stream.js';
import { stateWatchBench } from './cases/state-watch.js';
import {
  CASE_ORDER,
  consoleLine,
  readReport,
  renderMarkdown,
  resultsDir,
  verdict,
  type CaseReport,
} from './report.js';
import type { BenchCase } from './types.js';

const CASES: readonly BenchCase[] = [
  bufferBench,
  streamBench,
  podLogsBench,
  podLogsE2eBench,
  demoLogQueryBench,
  footprintBench,
  queryBench,
  prometheusParseBench,
  consoleRoundTripBench,
  stateWatchBench,
  prometheusTargetsBench,
];
// The pod-logs-e2e case starts a test cluster and collector processes: a few minutes of this;
// demo-log-query stores a million records first: up to two minutes on a busy machine.
const RUN_LIMIT_MS = 1_500_000;

if (CASES.map((c) => c.name).join() !== CASE_ORDER.join())
  throw new Error('bench/report.ts CASE_ORDER must list the cases of run.ts in order');

async function main(): Promise<void> {
  let current: string | undefined;
  const watchdog = setTimeout(() => {
    process.stderr.write(`bench exceeded ${String(RUN_LIMIT_MS)} ms\n`);
    // Registered last, so it runs after the case's own exit handler (which stops what the case
    // started, from files in this directory).
    process.once('exit', () => {
      if (current !== undefined) rmSync(current, { recursive: true, force: true });
    });
    process.exit(2);
  }, RUN_LIMIT_MS);
  watchdog.unref();
  let allMet = true;
  // `npm run bench -- pod-logs stream` runs just the named cases.
  const only = process.argv.slice(2);
  const unknown = only.filter((name) => !CASES.some((c) => c.name === name));
  if (unknown.length > 0) throw new Error(`no bench case ${unknown.join(', ')}`);
  const selected = only.length === 0 ? CASES : CASES.filter((c) => only.includes(c.name));
  mkdirSync(resultsDir, { recursive: true });
  for (const benchCase of selected) {
    const dir = mkdtempSync(join(tmpdir(), `kubexa-bench-${benchCase.name}-`));
    current = dir;
    const details: string[] = [];
    const loadStart = loadavg()[0] ?? 0;
    try {
      process.stdout.write(`# ${benchCase.name}\n`);
      const results = await benchCase.run({
        dir,
        log(line) {
          details.push(line);
          process.stdout.write(`  ${line}\n`);
        },
      });
      for (const result of results) {
        process.stdout.write(`${consoleLine(result)}\n`);
        if (verdict(result) === 'MISSED') allMet = false;
      }
      const report: CaseReport = {
        case: benchCase.name,
        measuredAt: new Date().toISOString(),
        node: process.version,
        cpus: cpus().length,
        loadAverage: { start: loadStart, end: loadavg()[0] ?? 0 },
        details,
        results,
      };
      writeFileSync(
        join(resultsDir, `${benchCase.name}.json`),
        `${JSON.stringify(report, null, 2)}\n`,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
  const reports = CASE_ORDER.map(readReport).filter((r) => r !== undefined);
  process.stdout.write(
    `\nREADME table (bench/results/*.json; \`npm run bench:readme\` writes it):\n\n` +
      `${renderMarkdown(reports)}\n`,
  );
  if (!allMet) process.exitCode = 1;
}

await main();
