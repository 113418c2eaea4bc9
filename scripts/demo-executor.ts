// The demo's executor: its own process, config and socket, with pod consoles on for every
// namespace and the demo gateway's public key as its only command key, so the consoles the
// page opens are signed, relayed by the collector and decided by the executor as in production.
import { spawn, type ChildProcess } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { stringify } from 'yaml';

export interface DemoExecutor {
  readonly child: ChildProcess;
  readonly socketPath: string;
  readonly configPath: string;
}

export async function startDemoExecutor(options: {
  readonly root: string;
  readonly workdir: string;
  readonly kubeconfigPath: string;
  readonly commandKey: { readonly id: string; readonly publicKeyPem: string };
  /**
   * Node jobs (cordon, uncordon, drain) on every node: only on the demo's own local cluster, never
   * on a cluster reached with --current-context.
   */
  readonly nodeJobs?: boolean;
}): Promise<DemoExecutor> {
  const socketPath = join(options.workdir, 'executor', 'executor.sock');
  const configPath = join(options.workdir, 'executor.yaml');
  await writeFile(
    configPath,
    stringify({
      exec: {
        pod: {
          enabled: true,
          rules: [{ id: 'demo-every-pod', namespace: '*' }],
          max_sessions: 4,
          resume_window_sec: 60,
        },
      },
      ...(options.nodeJobs === true
        ? {
            mutate: {
              node: {
                enabled: true,
                nodes: ['*'],
                verbs: ['cordon', 'uncordon', 'drain'],
                max_timeout_sec: 300,
              },
            },
          }
        : {}),
      security: {
        command_keys: [{ id: options.commandKey.id, public_key: options.commandKey.publicKeyPem }],
      },
    }),
  );
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', join(options.root, 'executor', 'main.ts'), `--config=${configPath}`],
    {
      cwd: options.root,
      env: {
        ...process.env,
        KUBECONFIG: options.kubeconfigPath,
        KUBEXA_EXECUTOR_SOCKET: socketPath,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  return { child, socketPath, configPath };
}
