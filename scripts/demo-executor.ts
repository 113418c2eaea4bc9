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

/** Node consoles in the demo: on the real node only, with a locally built helper image. */
export interface DemoNodeConsole {
  readonly node: string;
  /** image@sha256:... already on the node. */
  readonly image: string;
  /** The host process nsenter enters (the kubelet: PID 1 of these machines cannot be entered). */
  readonly targetPid: number;
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
  readonly nodeConsole?: DemoNodeConsole;
  /** How node starts the executor (the demo's bundle); default: its sources through tsx. */
  readonly nodeArgs?: readonly string[];
}): Promise<DemoExecutor> {
  const node = options.nodeConsole;
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
        ...(node === undefined
          ? {}
          : {
              node: {
                enabled: true,
                image: node.image,
                namespace: 'default',
                nodes: [node.node],
                nsenter_target_pid: node.targetPid,
                helper_ready_timeout_sec: 60,
                max_session_sec: 3600,
              },
            }),
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
    [
      ...(options.nodeArgs ?? ['--import', 'tsx', join(options.root, 'executor', 'main.ts')]),
      `--config=${configPath}`,
    ],
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
