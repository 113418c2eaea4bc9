// `npm run bench:readme`: writes the README's benchmark table from bench/results/*.json (what the
// last `npm run bench -- <case>` of each case measured). `--check` only compares (exit 1 if the
// README differs); the unit test bench/readme.test.ts does the same on every `npm test`.
import { writeFileSync } from 'node:fs';
import { expectedReadme, readmePath } from './report.js';

const { current, expected } = expectedReadme();
if (current === expected) {
  process.stdout.write('README.md benchmark table is up to date\n');
} else if (process.argv.includes('--check')) {
  process.stderr.write(
    'README.md benchmark table differs from bench/results: npm run bench:readme\n',
  );
  process.exitCode = 1;
} else {
  writeFileSync(readmePath, expected);
  process.stdout.write('README.md benchmark table updated from bench/results\n');
}
