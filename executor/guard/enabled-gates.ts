// Which privileged gates this executor has on, read from its OWN copy of the config file. This is
// the executor's answer to "what may I do"; nothing the collector sends changes it.
import type { Gate } from '../../proto/index.js';
import type { Config } from '../../shared/config/schema.js';
import type { GateName } from './authorize-command.js';

/** Proto gate values, named so this file reads without the generated enum's numbers. */
export interface GateValues {
  readonly podExec: Gate;
  readonly nodeShell: Gate;
  readonly nodeOps: Gate;
  readonly mutate: Gate;
}

export function enabledGates(
  config: Pick<Config, 'exec' | 'mutate'>,
  gates: GateValues,
): readonly Gate[] {
  const enabled: Gate[] = [];
  if (config.exec.pod.enabled) enabled.push(gates.podExec);
  if (config.exec.node.enabled) enabled.push(gates.nodeShell);
  if (config.mutate.node.enabled) enabled.push(gates.nodeOps);
  if (config.mutate.enabled) enabled.push(gates.mutate);
  return enabled;
}

/** The same answer as guard gate names, for the command guard. */
export function enabledGateNames(config: Pick<Config, 'exec' | 'mutate'>): ReadonlySet<GateName> {
  const enabled = new Set<GateName>();
  if (config.exec.pod.enabled) enabled.add('podExec');
  if (config.exec.node.enabled) enabled.add('nodeShell');
  if (config.mutate.node.enabled) enabled.add('nodeOps');
  if (config.mutate.enabled) enabled.add('mutate');
  return enabled;
}
