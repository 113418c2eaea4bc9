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
    /** Set by projects that start the real node (the node project): its name and address. */
    realNodeName: string;
    realNodeAddress: string;
    /** The machine's end of the node's veth, where the API server listens. */
    realNodeHostAddress: string;
    realNodeKubeletPid: number;
    realNodeContainerdSocket: string;
  }
}

/** Start attempts: on 2 loaded cores a component can miss its start deadline once. */
const START_ATTEMPTS = 2;

export default function setup(project: TestProject): Promise<() => Promise<void>> {
  return setupCluster(project, { realNode: false });
}

/** Starts the run's cluster (with the real node when asked) and provides it to the tests. */
export async function setupCluster(
  project: TestProject,
  { realNode }: { realNode: boolean },
): Promise<() => Promise<void>> {
  let options: ClusterOptions = {
    name: `kubexa-it-${String(process.pid)}`,
    workdir: await mkdtemp(join(tmpdir(), 'kubexa-it-')),
    env: process.env,
    realNode,
  };
  // If the runner dies without running teardown, take the cluster's processes with it.
  const onExit = () => {
    killClusterProcesses(options.workdir, options.name);
  };
  process.once('exit', onExit);
  let cluster;
  for (let attempt = 1; ; attempt++) {
    try {
      cluster = await startCluster(options);
      break;
    } catch (err: unknown) {
      // startCluster already stopped what it started and removed its directory.
      if (attempt >= START_ATTEMPTS) throw err;
      process.stdout.write(
        `test cluster start attempt ${String(attempt)} failed, retrying once:\n${String(err)}\n`,
      );
      options = { ...options, workdir: await mkdtemp(join(tmpdir(), 'kubexa-it-')) };
    }
  }
  process.stdout.write(
    `test cluster ${cluster.name} ready in ${String(cluster.startMs)} ms (${cluster.kubeconfigPath})\n`,
  );
  project.provide('kubeconfigPath', cluster.kubeconfigPath);
  project.provide('clusterBinDir', cluster.binDir);
  project.provide('clusterWorkdir', cluster.workdir);
  if (cluster.realNode !== undefined) {
    process.stdout.write(
      `real node ${cluster.realNode.name} (${cluster.realNode.address}) ready in ${String(cluster.realNode.startMs)} ms\n`,
    );
    project.provide('realNodeName', cluster.realNode.name);
    project.provide('realNodeAddress', cluster.realNode.address);
    project.provide('realNodeHostAddress', cluster.realNode.network.hostAddress);
    project.provide('realNodeKubeletPid', cluster.realNode.kubeletPid);
    project.provide('realNodeContainerdSocket', cluster.realNode.containerdSocket);
  }
  return async () => {
    await stopCluster(options);
    process.off('exit', onExit);
  };
}
