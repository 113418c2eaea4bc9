// Restarting one control-plane component of a running test cluster, as an upgrade or a crash
// of the API server would: the process kwokctl started is stopped (SIGTERM, SIGKILL after a
// grace), then started again with the same command line, working directory and environment, its
// output appended to the same log file and its pid written where teardown looks for it. etcd
// keeps its data, so the cluster comes back with every object and resourceVersion.
import { spawn } from 'node:child_process';
import { openSync, closeSync, readFileSync, readlinkSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';

const STOP_GRACE_MS = 10_000;
const READY_TIMEOUT_MS = 120_000;

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/** NUL-separated /proc file (cmdline, environ) as its parts. */
const procList = (pid: number, file: string): string[] =>
  readFileSync(`/proc/${String(pid)}/${file}`, 'utf8')
    .split('\0')
    .filter((part) => part !== '');

export interface RestartResult {
  /** From the stop signal until the API server answered again. */
  readonly downMs: number;
  readonly oldPid: number;
  readonly newPid: number;
}

/**
 * Restarts the kube-apiserver of the cluster whose kubeconfig is `kubeconfigPath` (kwokctl's
 * binary runtime: clusters/<name>/{kubeconfig.yaml,pids,logs}) and waits until it answers.
 * `whileDown` runs after the old process exited and before the new one starts.
 */
export async function restartApiServer(
  kubeconfigPath: string,
  whileDown: () => Promise<void> = () => Promise.resolve(),
): Promise<RestartResult> {
  const clusterDir = dirname(kubeconfigPath);
  const pidFile = join(clusterDir, 'pids', 'kube-apiserver.pid');
  const oldPid = Number.parseInt(readFileSync(pidFile, 'utf8').trim(), 10);
  if (!Number.isInteger(oldPid) || oldPid <= 1 || !alive(oldPid)) {
    throw new Error(`no running kube-apiserver in ${pidFile}`);
  }
  const [command, ...args] = procList(oldPid, 'cmdline');
  if (command === undefined) throw new Error(`kube-apiserver ${String(oldPid)}: no command line`);
  const cwd = readlinkSync(`/proc/${String(oldPid)}/cwd`);
  const env = Object.fromEntries(
    procList(oldPid, 'environ').map((entry) => {
      const at = entry.indexOf('=');
      return [entry.slice(0, at), entry.slice(at + 1)];
    }),
  );
  const started = Date.now();
  process.kill(oldPid, 'SIGTERM');
  const deadline = Date.now() + STOP_GRACE_MS;
  while (alive(oldPid) && Date.now() < deadline) await sleep(50);
  if (alive(oldPid)) process.kill(oldPid, 'SIGKILL');
  while (alive(oldPid)) await sleep(50);
  await whileDown();

  const log = openSync(join(clusterDir, 'logs', 'kube-apiserver.log'), 'a');
  const child = spawn(command, args, { cwd, env, detached: true, stdio: ['ignore', log, log] });
  closeSync(log);
  child.unref();
  const newPid = child.pid;
  if (newPid === undefined) throw new Error('kube-apiserver did not start again');
  writeFileSync(pidFile, String(newPid));

  const kube = new KubeConfig();
  kube.loadFromFile(kubeconfigPath);
  const core = kube.makeApiClient(CoreV1Api);
  const until = Date.now() + READY_TIMEOUT_MS;
  for (;;) {
    if (!alive(newPid)) throw new Error('kube-apiserver exited after the restart (see its log)');
    try {
      await core.readNamespace({ name: 'default' });
      return { downMs: Date.now() - started, oldPid, newPid };
    } catch (err: unknown) {
      if (Date.now() > until) {
        throw new Error(`kube-apiserver did not answer within ${String(READY_TIMEOUT_MS)} ms`, {
          cause: err,
        });
      }
      await sleep(250);
    }
  }
}
