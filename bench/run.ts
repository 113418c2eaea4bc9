// `npm run bench`: runs every case in CASES, prints each figure beside its same-run baseline
// and the ratio, and exits non-zero if a target is missed. Bounded: each case is sized to run
// in seconds, and the whole run is aborted after RUN_LIMIT_MS.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bufferBench } from './cases/buffer.js';
import { footprintBench } from './cases/footprint.js';
import { podLogsE2eBench } from './cases/pod-logs-e2e.js';
import { podLogsBench } from './cases/pod-logs.js';
import { streamBench } from './cases/stream.js';
import type { BenchCase, BenchResult } from './types.js';

const CASES: readonly BenchCase[] = [
  bufferBench,
  streamBench,
  podLogsBench,
  podLogsE2eBench,
  footprintBench,
];
// The pod-logs-e2e case starts a test cluster and collector processes: about a minute of this.
const RUN_LIMIT_MS = 180_000;

/** Whole numbers, but a small figure (µs, a few %) keeps one decimal. */
const fmt = (n: number): string =>
  (Math.abs(n) < 10 ? n.toFixed(1) : Math.round(n).toLocaleString('en-US')).padStart(11);

function print(result: BenchResult): boolean {
  const ratio = result.itemsPerSecond / result.baselineItemsPerSecond;
  const floor = result.targetItemsPerSecond;
  const ceiling = result.targetAtMost;
  const met =
    (floor === undefined || result.itemsPerSecond >= floor) &&
    (ceiling === undefined || result.itemsPerSecond <= ceiling);
  const verdict = met ? 'met' : 'MISSED';
  const targetText =
    (floor === undefined ? '' : `  target ${fmt(floor).trim()}: ${verdict}`) +
    (ceiling === undefined ? '' : `  target <= ${fmt(ceiling).trim()}: ${verdict}`);
  const unit = result.unit ?? 'items/s';
  process.stdout.write(
    `${result.name.padEnd(40)} ${fmt(result.itemsPerSecond)} ${unit} | ` +
      `${result.baselineName}: ${fmt(result.baselineItemsPerSecond)} ${unit} | ` +
      `ratio ${ratio.toFixed(2)}${targetText}\n`,
  );
  return met;
}

async function main(): Promise<void> {
  let current: string | undefined;
  const watchdog = setTimeout(() => {
    process.stderr.write(`bench exceeded ${RUN_LIMIT_MS} ms\n`);
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
  const selected = only.length === 0 ? CASES : CASES.filter((c) => only.includes(c.name));
  for (const benchCase of selected) {
    const dir = mkdtempSync(join(tmpdir(), `kubexa-bench-${benchCase.name}-`));
    current = dir;
    try {
      process.stdout.write(`# ${benchCase.name}\n`);
      for (const result of await benchCase.run({ dir })) allMet = print(result) && allMet;
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
  if (!allMet) process.exitCode = 1;
}

await main();
