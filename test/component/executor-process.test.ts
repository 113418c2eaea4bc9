// The executor as a real process: it loads its own config file, serves the Unix socket, reports
// only the gates that file switches on, and exits cleanly on SIGTERM.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { chmod, chown, mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createExecutorClient } from '../../collector/executor-client/executor-client.js';
import { Gate } from '../../proto/index.js';
import { eventually } from '../helpers/kube.js';

const children: ChildProcess[] = [];
const dirs: string[] = [];
afterEach(async () => {
  for (const child of children.splice(0)) if (child.exitCode === null) child.kill('SIGKILL');
  for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true });
});

/** A uid and gid that /etc/passwd and /etc/group do not name, as a Pod's securityContext may pick. */
const UNNAMED_ID = 54321;

/** `as`: run as that uid and gid (the test runs as root), with the socket in a directory it owns. */
// The executor under tsx takes seconds to start; on two cores shared by many jobs, tens of seconds.
async function startExecutor(configYaml: string, as?: number) {
  const dir = await mkdtemp(join(tmpdir(), 'kubexa-executor-proc-'));
  dirs.push(dir);
  const configPath = join(dir, 'config.yaml');
  let socketPath = join(dir, 'executor.sock');
  await writeFile(configPath, configYaml);
  if (as !== undefined) {
    await chmod(dir, 0o755);
    await chmod(configPath, 0o644);
    // The volume the executor's own socket directory is created in, as the kubelet mounts it.
    await mkdir(join(dir, 'run'));
    await chown(join(dir, 'run'), as, as);
    socketPath = join(dir, 'run', 'executor', 'executor.sock');
  }
  const env: NodeJS.ProcessEnv = { ...process.env, KUBEXA_EXECUTOR_SOCKET: socketPath };
  // The executor's container never gets the tenant token; prove it is not needed.
  delete env['KUBEXA_TENANT_TOKEN'];
  delete env['KUBEXA_GATEWAY_ADDRESS'];
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', 'executor/main.ts', `--config=${configPath}`],
    {
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
      ...(as === undefined ? {} : { uid: as, gid: as }),
    },
  );
  children.push(child);
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  return { child, socketPath, output: () => output };
}

describe('executor process', () => {
  it('serves the gates its own config enables and exits 0 on SIGTERM', async () => {
    const { child, socketPath, output } = await startExecutor(
      [
        'exec:',
        '  pod:',
        '    enabled: true',
        '    rules:',
        '      - namespace: "team-*"',
        'mutate:',
        '  node:',
        '    enabled: true',
        '    nodes: ["worker-*"]',
        '    verbs: [cordon, uncordon]',
        '',
      ].join('\n'),
    );
    await eventually(
      'the executor socket',
      async () => ((await stat(socketPath)).isSocket() ? true : undefined),
      { timeoutMs: 60_000 },
    ).catch((err: unknown) => {
      throw new Error(`${String(err)}\nexecutor output:\n${output()}`);
    });
    const client = createExecutorClient(socketPath);
    try {
      const answer = await client.getCapabilities('t-1', AbortSignal.timeout(5_000));
      expect(answer.enabledGates).toEqual([Gate.GATE_POD_EXEC, Gate.GATE_NODE_OPS]);
    } finally {
      client.close();
    }
    child.kill('SIGTERM');
    const [code] = (await once(child, 'exit')) as [number | null];
    expect(code).toBe(0);
    expect(output()).toContain('executor stopped');
    await expect(stat(socketPath)).rejects.toThrow(/ENOENT/);
  });

  it('starts as a uid that /etc/passwd does not name (a container image without that user)', async () => {
    const passwd = await readFile('/etc/passwd', 'utf8');
    // The premise: no entry, so os.userInfo() would throw ENOENT for this uid.
    expect(passwd.split('\n').filter((l) => l.split(':')[2] === String(UNNAMED_ID))).toEqual([]);
    const { socketPath, output } = await startExecutor(
      'exec:\n  pod:\n    enabled: false\n',
      UNNAMED_ID,
    );
    const socket = await eventually(
      'the executor socket',
      async () => {
        const stats = await stat(socketPath).catch(() => undefined);
        return stats?.isSocket() === true ? stats : undefined;
      },
      { timeoutMs: 60_000 },
    ).catch((err: unknown) => {
      throw new Error(`${String(err)}\nexecutor output:\n${output()}`);
    });
    expect(socket.uid).toBe(UNNAMED_ID);
  });

  it('refuses to start on an invalid config and names the key', async () => {
    const { child, output } = await startExecutor(
      'exec:\n  pod:\n    enabled: true\n    max_sessions: 500\n    rules:\n      - namespace: "*"\n',
    );
    const [code] = (await once(child, 'exit')) as [number | null];
    expect(code).toBe(1);
    expect(output()).toContain('exec.pod.max_sessions');
  });
});
