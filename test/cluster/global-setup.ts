// Starts one real cluster for the integration run and always tears it down. A cluster that
// cannot be built or started fails the run with the reason: integration tests never skip.
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { killClusterProcesses, startCluster, stopCluster, type ClusterOptions } from './cluster.js';

declare module 'vitest' {
  export interface ProvidedContext {
    kubeconfigPath: string;
    clusterBinDir: string;
    clusterWorkdir: string;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const options: ClusterOptions = {
    name: `kubexa-it-${String(process.pid)}`,
    workdir: await mkdtemp(join(tmpdir(), 'kubexa-it-')),
    env: process.env,
  };
  // If the runner dies without running teardown, take the cluster's processes with it.
  const onExit = () => {
    killClusterProcesses(options.workdir, options.name);
  };
  process.once('exit', onExit);
  const cluster = await startCluster(options);
  process.stdout.write(
    `test cluster ${cluster.name} ready in ${String(cluster.startMs)} ms (${cluster.kubeconfigPath})\n`,
  );
  project.provide('kubeconfigPath', cluster.kubeconfigPath);
  project.provide('clusterBinDir', cluster.binDir);
  project.provide('clusterWorkdir', cluster.workdir);
  return async () => {
    await stopCluster(options);
    process.off('exit', onExit);
  };
}
