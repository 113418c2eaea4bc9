// `npm run stress:pod-logs -- --kills 300`: the exactly-once stress test of the pod log path
// (test/stress/pod-logs-kill.ts) on a test cluster started here and always stopped, or on a running
// one with --kubeconfig. Prints the figures; exits 1 if any line was stored twice, lost, or stored
// although refused.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import {
  killClusterProcesses,
  startCluster,
  stopCluster,
  type ClusterOptions,
} from '../test/cluster/cluster.js';
import { runPodLogKillStress, type PodLogKillResult } from '../test/stress/pod-logs-kill.js';

const USAGE = `usage: npm run stress:pod-logs -- [--kills 300] [--seed N] [--max-kill-delay-ms 1500]
  [--flush-ms 250] [--kubeconfig <file of a running test cluster>]`;

function say(line: string): void {
  process.stdout.write(`${line}\n`);
}

function positive(name: string, text: string | undefined, fallback: number): number {
  if (text === undefined) return fallback;
  const value = Number(text);
  if (!Number.isInteger(value) || value <= 0) {
    throw new Error(`--${name} must be a whole number above 0, got "${text}"\n${USAGE}`);
  }
  return value;
}

function report(result: PodLogKillResult, seed: number): void {
  const rows: [string, string][] = [
    ['kills (SIGKILL)', String(result.kills)],
    ['containers', String(result.containers)],
    ['lines that must arrive, per container', String(result.linesExpected)],
    [
      'multi-line records / blank lines written',
      `${String(result.multilineRecords)} / ${String(result.blankLines)}`,
    ],
    ['lines refused by the rate limit (over the burst)', String(result.refusedLines)],
    ['pauses past the joiner hold (idle flushes)', String(result.idlePauses)],
    ['line occurrences stored', String(result.linesStored)],
    [
      'messages stored / re-sends the gateway dropped',
      `${String(result.messagesStored)} / ${String(result.resendsDeduplicated)}`,
    ],
    ['duplicates (a line stored twice, any id)', String(result.duplicates)],
    ['losses', String(result.losses)],
    ['refused lines stored anyway', String(result.leaks)],
    [
      'kills while starting / streaming / after acks',
      `${String(result.phases.starting)} / ${String(result.phases.streaming)} / ${String(result.phases.acked)}`,
    ],
    ['duration', `${(result.durationMs / 1000).toFixed(0)} s`],
    ['seed', String(seed)],
  ];
  for (const [name, value] of rows) say(`${name.padEnd(50)} ${value}`);
  for (const [kind, list] of Object.entries(result.examples)) {
    if (list.length > 0) say(`${kind}: ${list.join(', ')}`);
  }
  say(JSON.stringify({ ...result, seed }));
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      kills: { type: 'string' },
      seed: { type: 'string' },
      'max-kill-delay-ms': { type: 'string' },
      'flush-ms': { type: 'string' },
      kubeconfig: { type: 'string' },
    },
  });
  const kills = positive('kills', values.kills, 300);
  const seed = positive('seed', values.seed, Date.now() % 1_000_000_007);
  const scratch = await mkdtemp(join(tmpdir(), 'kubexa-stress-'));
  let cluster: ClusterOptions | undefined;
  const onExit = (): void => {
    if (cluster) killClusterProcesses(cluster.workdir, cluster.name);
  };
  process.once('exit', onExit);
  // Ctrl-C or a kill: stop the cluster on the way out (exit handlers do not run on a signal).
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      process.exit(130);
    });
  }
  try {
    let kubeconfigPath = values.kubeconfig;
    if (kubeconfigPath === undefined) {
      cluster = {
        name: `kubexa-stress-${String(process.pid)}`,
        workdir: join(scratch, 'cluster'),
        env: process.env,
      };
      say('starting a test cluster ...');
      kubeconfigPath = (await startCluster(cluster)).kubeconfigPath;
    }
    const result = await runPodLogKillStress({
      kubeconfigPath,
      kills,
      seed,
      scratch,
      maxKillDelayMs: positive('max-kill-delay-ms', values['max-kill-delay-ms'], 1_500),
      flushIntervalMs: positive('flush-ms', values['flush-ms'], 250),
      progress: say,
    });
    report(result, seed);
    return result.duplicates + result.losses + result.leaks === 0 ? 0 : 1;
  } finally {
    if (cluster) await stopCluster(cluster);
    process.off('exit', onExit);
    await rm(scratch, { recursive: true, force: true });
  }
}

process.exitCode = await main();
