// Stopping a cluster with a real node leaves nothing of it on the machine: no process, mount,
// network namespace, veth, iptables rule, cgroup or container log link, and the kernel settings
// the kubelet changed are back. This file starts its own cluster (the project's shared one keeps
// running), runs a pod on its node so there is something to clean, and stops it.
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import { describe, expect, it, onTestFinished } from 'vitest';
import {
  clusterVersions,
  startCluster,
  stopCluster,
  type ClusterOptions,
} from '../cluster/cluster.js';
import { REAL_NODE_LABEL, REAL_NODE_TAINT } from '../cluster/node.js';
import { eventually, loadKubeConfig } from '../helpers/kube.js';

const sh = (command: string, args: string[]) => execFileSync(command, args, { encoding: 'utf8' });

function processesReferring(text: string): string[] {
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry) && Number(entry) !== process.pid)
    .flatMap((entry) => {
      try {
        const cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8').replaceAll('\0', ' ');
        return cmdline.includes(text) ? [`${entry}: ${cmdline}`] : [];
      } catch {
        return [];
      }
    });
}

const mountsUnder = (dir: string) =>
  readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .filter((line) => (line.split(' ')[4] ?? '').startsWith(dir));

const cgroupsNamed = (root: string) =>
  readdirSync('/sys/fs/cgroup').filter((h) => existsSync(join('/sys/fs/cgroup', h, root)));

describe('stopping a cluster with a real node', () => {
  it('leaves no process, mount, namespace, veth, iptables rule, cgroup or sysctl change', async () => {
    // Values the kubelet is known to change (it sets 10, 1 and 1): restoring must bring these back.
    const sysctls = {
      'kernel/panic': '0',
      'kernel/panic_on_oops': '0',
      'vm/overcommit_memory': '0',
    };
    const before = Object.fromEntries(
      Object.keys(sysctls).map((key) => [key, readFileSync(`/proc/sys/${key}`, 'utf8').trim()]),
    );
    for (const [key, value] of Object.entries(sysctls)) writeFileSync(`/proc/sys/${key}`, value);
    onTestFinished(() => {
      for (const [key, value] of Object.entries(before)) writeFileSync(`/proc/sys/${key}`, value);
    });
    const iptablesBefore = sh('iptables-save', [])
      .split('\n')
      .filter((l) => l.startsWith('-A')).length;

    // kwokctl can pick a port another cluster on this machine took meanwhile: retry once, as the
    // global setup does (startCluster cleans up after a failed attempt).
    let options: ClusterOptions | undefined;
    let cluster;
    for (let attempt = 1; cluster === undefined; attempt++) {
      options = {
        name: `kubexa-teardown-${String(process.pid)}-${String(attempt)}`,
        workdir: await mkdtemp(join(tmpdir(), 'kubexa-teardown-')),
        env: process.env,
        realNode: true,
      };
      try {
        cluster = await startCluster(options);
      } catch (err: unknown) {
        if (attempt >= 2) throw err;
      }
    }
    if (options === undefined) throw new Error('unreachable');
    const node = cluster.realNode;
    if (node === undefined) throw new Error('startCluster returned no real node');
    try {
      const core = loadKubeConfig(cluster.kubeconfigPath).makeApiClient(CoreV1Api);
      await core.createNamespacedPod({
        namespace: 'default',
        body: {
          metadata: { name: 'left-running' },
          spec: {
            nodeSelector: { [REAL_NODE_LABEL]: 'true' },
            tolerations: [{ key: REAL_NODE_TAINT, operator: 'Exists' }],
            containers: [
              {
                name: 'main',
                image: clusterVersions()['BUSYBOX_IMAGE'] ?? '',
                imagePullPolicy: 'Never',
                command: ['sleep', '3600'],
              },
            ],
          },
        },
      });
      await eventually(
        'the pod to run',
        async () => {
          const pod = await core.readNamespacedPod({ name: 'left-running', namespace: 'default' });
          return pod.status?.phase === 'Running' ? true : undefined;
        },
        { timeoutMs: 90_000 },
      );
      // While it runs, every kind of trace exists: the checks below can see each of them.
      expect(processesReferring(options.workdir).length).toBeGreaterThan(0);
      expect(mountsUnder(options.workdir).length).toBeGreaterThan(0);
      expect(sh('ip', ['netns', 'list'])).toContain(node.network.netns);
      expect(cgroupsNamed(`kubexa-${node.network.id}`).length).toBeGreaterThan(0);
      expect(readFileSync('/proc/sys/kernel/panic', 'utf8').trim()).toBe('10');
    } finally {
      await stopCluster(options);
    }

    expect(processesReferring(options.workdir)).toEqual([]);
    expect(mountsUnder(options.workdir)).toEqual([]);
    expect(existsSync(options.workdir)).toBe(false);
    expect(sh('ip', ['netns', 'list'])).not.toContain(node.network.netns);
    expect(sh('ip', ['-o', 'link'])).not.toContain(node.network.hostVeth);
    expect(sh('ip', ['-4', 'route'])).not.toContain(node.network.podCidr.split('/')[0]);
    const iptables = sh('iptables-save', []);
    expect(iptables).not.toContain(node.network.podCidr);
    expect(iptables.split('\n').filter((l) => l.startsWith('-A')).length).toBe(iptablesBefore);
    expect(cgroupsNamed(`kubexa-${node.network.id}`)).toEqual([]);
    for (const [key, value] of Object.entries(sysctls)) {
      expect(readFileSync(`/proc/sys/${key}`, 'utf8').trim(), key).toBe(value);
    }
  });
});
