// `npm run cluster:up` / `npm run cluster:down`: a long-lived development cluster in a fixed
// temporary directory, so `down` finds what `up` started.
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startCluster, stopCluster, type ClusterOptions } from './cluster.js';

const options: ClusterOptions = {
  name: 'kubexa-dev',
  workdir: process.env['KUBEXA_DEV_CLUSTER_DIR'] ?? join(tmpdir(), 'kubexa-agent-dev-cluster'),
  env: process.env,
};

async function main(command: string | undefined): Promise<void> {
  if (command === 'up') {
    await stopCluster(options);
    const cluster = await startCluster(options);
    process.stdout.write(
      [
        `test cluster ${cluster.name} is up in ${String(cluster.startMs)} ms`,
        `  kubeconfig: ${cluster.kubeconfigPath}`,
        `  binaries:   ${cluster.binDir} (kubectl, helm, helm3)`,
        '',
        'use it with:',
        `  export KUBECONFIG=${cluster.kubeconfigPath}`,
        `  export PATH=${cluster.binDir}:$PATH`,
        '  kubectl get nodes',
        'stop it with: npm run cluster:down',
        '',
      ].join('\n'),
    );
    return;
  }
  if (command === 'down') {
    await stopCluster(options);
    process.stdout.write(`test cluster ${options.name} stopped; ${options.workdir} removed\n`);
    return;
  }
  throw new Error('usage: cli.ts up|down');
}

main(process.argv[2]).catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
  process.exitCode = 1;
});
