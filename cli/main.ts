#!/usr/bin/env node
// The kubexa-agent command line for operators. Today one command:
//   kubexa-agent config check FILE
// This is the only file of the CLI that touches process (argv, env, exit code).
import { readFileSync } from 'node:fs';
import { runConfigCheck } from '../shared/config/config-check.js';
import { getErrorMessage } from '../shared/errors.js';

const USAGE = 'usage: kubexa-agent config check FILE\n';

function main(argv: readonly string[]): number {
  const [group, command, file, ...rest] = argv;
  if (group !== 'config' || command !== 'check' || file === undefined || rest.length > 0) {
    process.stderr.write(USAGE);
    return 2;
  }
  let fileText: string;
  try {
    fileText = readFileSync(file, 'utf8');
  } catch (err: unknown) {
    process.stderr.write(`error: cannot read ${file}: ${getErrorMessage(err)}\n`);
    return 1;
  }
  return runConfigCheck({
    fileText,
    env: process.env,
    write: (text) => process.stdout.write(text),
  });
}

process.exitCode = main(process.argv.slice(2));
