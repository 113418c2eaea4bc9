// `npm run bench`: runs every case in CASES, prints each figure beside its same-run baseline
// and the ratio, and exits non-zero if a target is missed. Bounded: each case is sized to run
// in seconds, and the whole run is aborted after RUN_LIMIT_MS.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bufferBench } from './cases/buffer.js';
import { podLogsBench } from './cases/pod-logs.js';
import { streamBench } from './cases/stream.js';
import type { BenchCase, BenchResult } from './types.js';

const CASES: readonly BenchCase[] = [bufferBench, streamBench, podLogsBench];
const RUN_LIMIT_MS = 90_000;

const fmt = (n: number): string => Math.round(n).toLocaleString('en-US').padStart(11);

function print(result: BenchResult): boolean {
  const ratio = result.itemsPerSecond / result.baselineItemsPerSecond;
  const target = result.targetItemsPerSecond;
  const met = target === undefined || result.itemsPerSecond >= target;
  const targetText =
    target === undefined ? '' : `  target ${fmt(target).trim()}: ${met ? 'met' : 'MISSED'}`;
  process.stdout.write(
    `${result.name.padEnd(40)} ${fmt(result.itemsPerSecond)} items/s | ` +
      `${result.baselineName}: ${fmt(result.baselineItemsPerSecond)} items/s | ` +
      `ratio ${ratio.toFixed(2)}${targetText}\n`,
  );
  return met;
}

async function main(): Promise<void> {
  const watchdog = setTimeout(() => {
    process.stderr.write(`bench exceeded ${RUN_LIMIT_MS} ms\n`);
    process.exit(2);
  }, RUN_LIMIT_MS);
  watchdog.unref();
  let allMet = true;
  for (const benchCase of CASES) {
    const dir = mkdtempSync(join(tmpdir(), `kubexa-bench-${benchCase.name}-`));
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
