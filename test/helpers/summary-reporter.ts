// Prints one plain closing line, "tests: N passed, N failed, N skipped", after vitest's own
// summary, so any reader of the run's output (people and CI) sees the counts in one place.
import type { Reporter, TestCase, TestModule, TestSuite } from 'vitest/node';

/**
 * True when the test was meant to run but a suite or file around it failed on its own (a
 * `beforeAll` or `afterAll` that threw, a collection error): vitest reports such a test as
 * "skipped", but nothing it promises was checked, so it counts as failed. A test skipped in the
 * source (`it.skip`, `.todo`, filtered out by `.only`) or by itself at run time
 * (`context.skip()`) in suites without errors of their own stays skipped.
 */
function blockedBySetupFailure(testCase: TestCase): boolean {
  if (testCase.options.mode !== 'run') return false;
  let around: TestSuite | TestModule = testCase.parent;
  for (;;) {
    if (around.errors().length > 0) return true;
    if (around.type === 'module') return false;
    around = around.parent;
  }
}

/** How many of the slowest files the summary lists. */
const SLOWEST_FILES = 15;

/**
 * The slowest files of the run with their wall time, so every CI log says where the suite's time
 * goes (the first thing to read when the run's duration has to come down).
 */
export function slowestFiles(testModules: readonly TestModule[]): string {
  const timed = testModules
    .map((testModule) => ({
      file:
        testModule.project.name === ''
          ? testModule.relativeModuleId
          : `${testModule.project.name}: ${testModule.relativeModuleId}`,
      ms: testModule.diagnostic().duration,
    }))
    .sort((a, b) => b.ms - a.ms)
    .slice(0, SLOWEST_FILES);
  if (timed.length === 0) return '';
  const lines = timed.map(({ file, ms }) => `  ${(ms / 1000).toFixed(1).padStart(7)} s  ${file}`);
  return `\nslowest test files (wall time):\n${lines.join('\n')}\n`;
}

export default class SummaryReporter implements Reporter {
  onTestRunEnd(testModules: readonly TestModule[]): void {
    let passed = 0;
    let failed = 0;
    let skipped = 0;
    for (const testModule of testModules) {
      for (const testCase of testModule.children.allTests()) {
        const state = testCase.result().state;
        if (state === 'passed') passed += 1;
        else if (state === 'failed' || blockedBySetupFailure(testCase)) failed += 1;
        else skipped += 1;
      }
      // A file that failed to load has no test cases but must still count as a failure.
      if (testModule.state() === 'failed' && testModule.children.size === 0) failed += 1;
    }
    process.stdout.write(slowestFiles(testModules));
    process.stdout.write(
      `\ntests: ${String(passed)} passed, ${String(failed)} failed, ${String(skipped)} skipped\n`,
    );
  }
}
