// The exactly-once stress test (test/stress/pod-logs-kill.ts) with a small count of kills on the
// suite's cluster: the collector's log path SIGKILLed 12 times at random points of its flush cycle
// while multi-line records, blank lines, refused lines and idle pauses are written. The full run
// (`npm run stress:pod-logs -- --kills 300`) is the same code with more kills; its figures are in
// the README.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { runPodLogKillStress } from '../stress/pod-logs-kill.js';

const KILLS = 12;
let scratch: string;

beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'kubexa-podlogs-stress-'));
});

afterAll(async () => {
  await rm(scratch, { recursive: true, force: true });
});

describe('pod log exactly-once under repeated SIGKILL', () => {
  it(
    `${String(KILLS)} kills across the flush cycle: no line stored twice, none lost, none refused stored`,
    { timeout: 480_000 },
    async () => {
      const result = await runPodLogKillStress({
        kubeconfigPath: inject('kubeconfigPath'),
        kills: KILLS,
        scratch,
      });
      expect(result.kills).toBe(KILLS);
      // The log held what the test is about.
      expect(result.multilineRecords).toBeGreaterThan(0);
      expect(result.blankLines).toBeGreaterThan(0);
      expect(result.refusedLines).toBeGreaterThan(0);
      expect(result.idlePauses).toBeGreaterThan(0);
      expect(result.linesExpected).toBeGreaterThan(500);
      expect({
        duplicates: result.duplicates,
        losses: result.losses,
        leaks: result.leaks,
        examples: result.examples,
      }).toEqual({
        duplicates: 0,
        losses: 0,
        leaks: 0,
        examples: { duplicates: [], losses: [], leaks: [] },
      });
      expect(result.linesStored).toBe(result.linesExpected * result.containers);
    },
  );
});
