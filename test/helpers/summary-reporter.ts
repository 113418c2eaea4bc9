// Prints one plain closing line, "tests: N passed, N failed, N skipped", after vitest's own
// summary, so any reader of the run's output (people and CI) sees the counts in one place.
import type { Reporter, TestModule } from 'vitest/node';

export default class SummaryReporter implements Reporter {
  onTestRunEnd(testModules: readonly TestModule[]): void {
    let passed = 0;
    let failed = 0;
    let skipped = 0;
    for (const testModule of testModules) {
      for (const testCase of testModule.children.allTests()) {
        const state = testCase.result().state;
        if (state === 'passed') passed += 1;
        else if (state === 'failed') failed += 1;
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
