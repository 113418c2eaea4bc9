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
    process.stdout.write(
      `\ntests: ${String(passed)} passed, ${String(failed)} failed, ${String(skipped)} skipped\n`,
    );
  }
}
