// `kubexa-agent config check FILE`: the loader's verdict in human form. Warnings and errors are
// printed one per line; a valid config is printed back in full (defaults and inherited values
// resolved, secrets masked) so the operator sees what the agent will actually run with.
import { stringify } from 'yaml';
import { ConfigError, formatConfigIssue, getErrorMessage } from '../errors.js';
import { toConfigDocument } from './config-output.js';
import { loadConfig } from './load-config.js';

export interface ConfigCheckOptions {
  readonly fileText: string;
  readonly env: Readonly<Record<string, string | undefined>>;
  /** Receives the report, a line or a block at a time, each ending in a newline. */
  readonly write: (text: string) => void;
}

/** Exit status of a check: 0 when the agent would start with this config, 1 when it would not. */
export function runConfigCheck(options: ConfigCheckOptions): number {
  const { write } = options;
  try {
    const { config, warnings } = loadConfig({ fileText: options.fileText, env: options.env });
    for (const warning of warnings) write(`warning: ${warning}\n`);
    write('# effective configuration (defaults applied, secrets masked, durations as written)\n');
    write(stringify(toConfigDocument(config)));
    return 0;
  } catch (err: unknown) {
    if (!(err instanceof ConfigError)) {
      // Not a config problem (a bug): report it without the stack, still as a failure.
      write(`error: ${getErrorMessage(err)}\n`);
      return 1;
    }
    for (const warning of err.warnings) write(`warning: ${warning}\n`);
    for (const issue of err.issues) write(`error: ${formatConfigIssue(issue)}\n`);
    const count = err.issues.length === 1 ? '1 problem' : `${err.issues.length} problems`;
    write(`config check failed: ${count}\n`);
    return 1;
  }
}
