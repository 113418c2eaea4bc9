// `npm run test:mutation`: applies each mutation listed in mutations.ts, one at a time, to a
// scratch copy of the repository (the working tree is never touched, so an interrupted run
// leaves nothing behind), runs the tests named for it, and expects them to fail. Prints a table
// and the mutation score; exits non-zero if any mutation survives, if its original text is no
// longer found exactly once (so the list cannot silently rot), if the mutated code does not
// even load, or if the named tests fail before any mutation.
//
//   npm run test:mutation                    every mutation
//   npm run test:mutation -- --ci            the quick subset CI runs (ci: true)
//   npm run test:mutation -- --area buffer   one area; ids as arguments pick single mutations
//   npm run test:mutation -- --check         only checks that every original text is found
//   npm run test:mutation -- --list <file>   another list (a module exporting MUTATIONS)
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { Mutation } from './mutation.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
/** A mutation that makes its tests hang counts as caught once this passes. */
const RUN_LIMIT_MS = 300_000;

type Outcome =
  | { readonly kind: 'killed'; readonly by: string }
  | { readonly kind: 'survived' }
  | { readonly kind: 'timed out' }
  | { readonly kind: 'not found'; readonly detail: string }
  | { readonly kind: 'does not load'; readonly detail: string }
  | { readonly kind: 'tests fail unmutated'; readonly detail: string };

interface Row {
  readonly mutation: Mutation;
  readonly line: number;
  readonly outcome: Outcome;
  readonly seconds: number;
}

interface Options {
  readonly ci: boolean;
  readonly check: boolean;
  readonly areas: readonly string[];
  readonly ids: readonly string[];
  /** A module exporting MUTATIONS; mutations.ts by default. */
  readonly list: string | undefined;
}

function parseArgs(argv: readonly string[]): Options {
  const areas: string[] = [];
  const ids: string[] = [];
  let ci = false;
  let check = false;
  let list: string | undefined;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] ?? '';
    if (arg === '--ci') ci = true;
    else if (arg === '--check') check = true;
    else if (arg === '--list') list = argv[++i];
    else if (arg === '--area') areas.push(argv[++i] ?? '');
    else if (arg.startsWith('--')) throw new Error(`unknown option ${arg}`);
    else ids.push(arg);
  }
  return { ci, check, areas, ids, list };
}

function select(all: readonly Mutation[], options: Options): Mutation[] {
  const unknown = options.ids.filter((id) => !all.some((m) => m.id === id));
  if (unknown.length > 0) throw new Error(`no mutation with id ${unknown.join(', ')}`);
  return all.filter(
    (m) =>
      (!options.ci || m.ci === true) &&
      (options.areas.length === 0 || options.areas.includes(m.area)) &&
      (options.ids.length === 0 || options.ids.includes(m.id)),
  );
}

/** Problems with the list itself: duplicate ids, missing files, text not found exactly once. */
function locate(mutation: Mutation): { line: number } | { problem: string } {
  const path = join(root, mutation.file);
  if (!existsSync(path)) return { problem: `${mutation.file} does not exist` };
  const missing = mutation.tests.filter((test) => !existsSync(join(root, test)));
  if (missing.length > 0) return { problem: `test file ${missing.join(', ')} does not exist` };
  if (mutation.original === '') return { problem: 'the original text is empty' };
  if (mutation.original === mutation.replacement) return { problem: 'replacement = original' };
  const text = readFileSync(path, 'utf8');
  const at = text.indexOf(mutation.original);
  if (at === -1) return { problem: `original text not found in ${mutation.file}` };
  if (text.includes(mutation.original, at + 1))
    return { problem: `original text found more than once in ${mutation.file}` };
  return { line: text.slice(0, at).split('\n').length };
}

/** The tracked and untracked (not ignored) files of the working tree, node_modules linked. */
function scratchCopy(): string {
  const dir = mkdtempSync(join(tmpdir(), 'kubexa-mutation-'));
  const files = execFileSync(
    'git',
    ['ls-files', '-z', '--cached', '--others', '--exclude-standard'],
    {
      cwd: root,
      encoding: 'utf8',
    },
  )
    .split('\0')
    .filter((file) => file !== '' && file !== 'node_modules' && existsSync(join(root, file)));
  for (const file of files) {
    mkdirSync(dirname(join(dir, file)), { recursive: true });
    copyFileSync(join(root, file), join(dir, file));
  }
  symlinkSync(realpathSync(join(root, 'node_modules')), join(dir, 'node_modules'));
  return dir;
}

interface JsonReport {
  readonly numFailedTests: number;
  readonly numPassedTests: number;
  readonly numTotalTests: number;
  readonly testResults: readonly {
    readonly name: string;
    readonly status: string;
    readonly message?: string;
    readonly assertionResults: readonly { readonly status: string; readonly fullName: string }[];
  }[];
}

let running: ChildProcess | undefined;

/** Runs vitest on `tests` in `dir`; resolves with its JSON report, or undefined on timeout. */
async function runTests(
  dir: string,
  project: string,
  tests: readonly string[],
  testName: string | undefined,
): Promise<JsonReport | undefined> {
  const reportPath = join(dir, '.mutation-report.json');
  rmSync(reportPath, { force: true });
  const child = spawn(
    process.execPath,
    [
      join(dir, 'node_modules', 'vitest', 'vitest.mjs'),
      'run',
      '--project',
      project,
      '--reporter=json',
      `--outputFile=${reportPath}`,
      ...(testName === undefined ? [] : ['--testNamePattern', escapeRegExp(testName)]),
      ...tests,
    ],
    {
      cwd: dir,
      stdio: ['ignore', 'ignore', 'pipe'],
      detached: true,
      env: { ...process.env, CI: '1' },
    },
  );
  running = child;
  const stderr: string[] = [];
  child.stderr.on('data', (chunk: Buffer) => stderr.push(chunk.toString()));
  const timer = setTimeout(() => {
    killGroup(child);
  }, RUN_LIMIT_MS);
  const timedOut = await new Promise<boolean>((resolve) =>
    child.once('exit', (_code, signal) => {
      resolve(signal === 'SIGKILL');
    }),
  );
  clearTimeout(timer);
  running = undefined;
  if (timedOut) return undefined;
  if (!existsSync(reportPath))
    throw new Error(`vitest wrote no report: ${stderr.join('').slice(-1500)}`);
  return JSON.parse(readFileSync(reportPath, 'utf8')) as JsonReport;
}

const escapeRegExp = (text: string): string => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

function killGroup(child: ChildProcess): void {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
  try {
    process.kill(-child.pid, 'SIGKILL');
  } catch {
    // Already gone.
  }
}

/**
 * Files that failed without running any test (the code did not load), or no test at all (a
 * global setup such as the test cluster failed): nothing was checked either way.
 */
function loadFailures(report: JsonReport): string | undefined {
  if (report.numTotalTests === 0 || report.testResults.length === 0)
    return 'no test ran (did a global setup, such as the test cluster, fail?)';
  // Every test skipped: a `testName` that matches no test name (any more).
  if (report.numPassedTests + report.numFailedTests === 0)
    return 'every test was skipped (does testName still match a test?)';
  const broken = report.testResults.filter(
    (file) => file.status === 'failed' && file.assertionResults.length === 0,
  );
  if (broken.length === 0) return undefined;
  return broken.map((file) => (file.message ?? '').split('\n')[0] ?? '').join('; ');
}

function firstFailure(report: JsonReport): string {
  for (const file of report.testResults) {
    const failed = file.assertionResults.find((test) => test.status === 'failed');
    if (failed !== undefined) return failed.fullName;
  }
  // The file failed around its tests (a beforeAll or afterAll threw).
  const file = report.testResults.find((f) => f.status === 'failed');
  return `${file?.name.split('/').pop() ?? '?'}: ${(file?.message ?? '').split('\n')[0] ?? ''}`;
}

async function mutate(dir: string, mutation: Mutation): Promise<Outcome> {
  const path = join(dir, mutation.file);
  const original = readFileSync(path, 'utf8');
  writeFileSync(
    path,
    original.replace(mutation.original, () => mutation.replacement),
  );
  try {
    const report = await runTests(
      dir,
      mutation.project ?? 'unit',
      mutation.tests,
      mutation.testName,
    );
    if (report === undefined) return { kind: 'timed out' };
    const notLoaded = loadFailures(report);
    if (notLoaded !== undefined) return { kind: 'does not load', detail: notLoaded };
    const failedAround = report.testResults.some((file) => file.status === 'failed');
    if (report.numFailedTests > 0 || failedAround)
      return { kind: 'killed', by: firstFailure(report) };
    return { kind: 'survived' };
  } finally {
    writeFileSync(path, original);
  }
}

const caught = (outcome: Outcome): boolean =>
  outcome.kind === 'killed' || outcome.kind === 'timed out';

function describeOutcome(outcome: Outcome): string {
  switch (outcome.kind) {
    case 'killed':
      return `killed by: ${outcome.by}`;
    case 'survived':
      return 'SURVIVED';
    case 'timed out':
      return `killed (tests still running after ${String(RUN_LIMIT_MS / 1000)} s)`;
    case 'not found':
    case 'does not load':
    case 'tests fail unmutated':
      return `${outcome.kind.toUpperCase()}: ${outcome.detail}`;
  }
}

function printTable(rows: readonly Row[]): void {
  const cells = rows.map((row) => [
    row.mutation.id,
    row.line === 0 ? row.mutation.file : `${row.mutation.file}:${String(row.line)}`,
    row.seconds.toFixed(1),
    describeOutcome(row.outcome).slice(0, 140),
  ]);
  const header = ['mutation', 'where', 's', 'result'];
  const widths = header.map((h, i) => Math.max(h.length, ...cells.map((c) => (c[i] ?? '').length)));
  const line = (values: readonly string[]): string =>
    values.map((v, i) => (i === values.length - 1 ? v : v.padEnd(widths[i] ?? 0))).join('  ');
  process.stdout.write(`\n${line(header)}\n`);
  for (const c of cells) process.stdout.write(`${line(c)}\n`);
}

async function main(): Promise<number> {
  const options = parseArgs(process.argv.slice(2));
  const listPath = options.list ?? join(root, 'test', 'mutation', 'mutations.ts');
  const { MUTATIONS } = (await import(pathToFileURL(listPath).href)) as {
    MUTATIONS: readonly Mutation[];
  };
  const ids = new Set<string>();
  for (const m of MUTATIONS) {
    if (ids.has(m.id)) throw new Error(`mutation id ${m.id} is listed twice`);
    ids.add(m.id);
  }
  const selected = select(MUTATIONS, options);
  if (selected.length === 0) throw new Error('no mutation selected');

  const rows: Row[] = [];
  const runnable: { mutation: Mutation; line: number }[] = [];
  for (const mutation of selected) {
    const where = locate(mutation);
    if ('problem' in where)
      rows.push({
        mutation,
        line: 0,
        outcome: { kind: 'not found', detail: where.problem },
        seconds: 0,
      });
    else runnable.push({ mutation, line: where.line });
  }
  if (options.check) {
    printTable(rows);
    process.stdout.write(
      `\n${String(runnable.length)} of ${String(selected.length)} original texts found once\n`,
    );
    return rows.length === 0 ? 0 : 1;
  }

  const dir = scratchCopy();
  const cleanUp = (): void => {
    if (running !== undefined) killGroup(running);
    rmSync(dir, { recursive: true, force: true });
  };
  const onSignal = (signal: NodeJS.Signals): void => {
    cleanUp();
    process.stderr.write(`\ninterrupted by ${signal}; the working tree was never modified\n`);
    process.exit(130);
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  process.once('exit', cleanUp);
  try {
    // The named tests must pass before anything is mutated, or a "kill" proves nothing.
    const baselines = new Map<string, string | undefined>();
    for (const { mutation, line } of runnable) {
      const project = mutation.project ?? 'unit';
      const key = `${project} ${[...mutation.tests].sort().join(' ')} ${mutation.testName ?? ''}`;
      if (!baselines.has(key)) {
        const report = await runTests(dir, project, mutation.tests, mutation.testName);
        baselines.set(
          key,
          report === undefined
            ? 'timed out'
            : (loadFailures(report) ??
                (report.numFailedTests > 0 || report.testResults.some((f) => f.status === 'failed')
                  ? firstFailure(report)
                  : undefined)),
        );
      }
      const broken = baselines.get(key);
      const started = performance.now();
      const outcome: Outcome =
        broken === undefined
          ? await mutate(dir, mutation)
          : { kind: 'tests fail unmutated', detail: broken };
      const seconds = (performance.now() - started) / 1000;
      rows.push({ mutation, line, outcome, seconds });
      process.stdout.write(
        `${caught(outcome) ? 'caught  ' : 'PROBLEM '} ${mutation.id} (${seconds.toFixed(1)} s)\n`,
      );
    }
  } finally {
    cleanUp();
  }

  printTable(rows);
  const killed = rows.filter((row) => caught(row.outcome)).length;
  process.stdout.write(
    `\nmutation score: ${String(killed)}/${String(rows.length)} killed` +
      ` (${((killed / rows.length) * 100).toFixed(0)} %)\n`,
  );
  return killed === rows.length ? 0 : 1;
}

process.exitCode = await main();
