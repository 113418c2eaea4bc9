// The real worker node does what kwok only imitates: a container's stdout comes back through
// pods/log, `kubectl exec -it` gets a real terminal whose size follows the client, exit codes come
// back, the `kubernetes` Service is reachable from a pod, and a privileged hostPID pod enters the
// machine's namespaces with nsenter.
import { join } from 'node:path';
import { PassThrough, Writable } from 'node:stream';
import { CoreV1Api, Exec, type V1Pod, type V1Status } from '@kubernetes/client-node';
import { spawn as spawnPty } from 'node-pty';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { clusterVersions } from '../cluster/cluster.js';
import { machineHostname, REAL_NODE_LABEL, REAL_NODE_TAINT } from '../cluster/node.js';
import {
  createTestNamespace,
  eventually,
  loadKubeConfig,
  type TestNamespace,
} from '../helpers/kube.js';

const kubeconfigPath = inject('kubeconfigPath');
const kc = loadKubeConfig(kubeconfigPath);
const core = kc.makeApiClient(CoreV1Api);
const busybox = clusterVersions()['BUSYBOX_IMAGE'] ?? '';

let ns: TestNamespace;

beforeAll(async () => {
  ns = await createTestNamespace(kc, 'real-node');
});

afterAll(async () => {
  await ns.delete();
});

/** A pod pinned to the real node (its label, its taint tolerated), from the local busybox image. */
function realNodePod(name: string, command: string[], extra: Partial<V1Pod['spec']> = {}): V1Pod {
  return {
    metadata: { name, namespace: ns.name },
    spec: {
      nodeSelector: { [REAL_NODE_LABEL]: 'true' },
      tolerations: [{ key: REAL_NODE_TAINT, operator: 'Exists', effect: 'NoSchedule' }],
      restartPolicy: 'Never',
      terminationGracePeriodSeconds: 1,
      containers: [{ name: 'main', image: busybox, imagePullPolicy: 'Never', command }],
      ...extra,
    },
  };
}

/** Waits for a phase, reporting the pod's events and status if it never gets there. */
async function waitForPhase(name: string, phases: string[]): Promise<V1Pod> {
  try {
    return await eventually(
      `pod ${name} to reach ${phases.join(' or ')}`,
      async () => {
        const pod = await core.readNamespacedPod({ name, namespace: ns.name });
        return phases.includes(pod.status?.phase ?? '') ? pod : undefined;
      },
      { timeoutMs: 90_000, intervalMs: 500 },
    );
  } catch (err: unknown) {
    const pod = await core.readNamespacedPod({ name, namespace: ns.name }).catch(() => undefined);
    const events = await core.listNamespacedEvent({
      namespace: ns.name,
      fieldSelector: `involvedObject.name=${name}`,
    });
    const lines = events.items.map((e) => `${e.reason ?? ''}: ${e.message ?? ''}`).join('\n');
    throw new Error(
      `${String(err)}\nstatus: ${JSON.stringify(pod?.status?.containerStatuses)}\nevents:\n${lines}`,
      { cause: err },
    );
  }
}

describe('the real node', () => {
  it('is Ready beside the kwok nodes, labelled and tainted so kwok tests never land on it', async () => {
    const node = await core.readNode({ name: inject('realNodeName') });
    expect(node.metadata?.labels?.[REAL_NODE_LABEL]).toBe('true');
    expect(node.spec?.taints).toContainEqual(
      expect.objectContaining({ key: REAL_NODE_TAINT, effect: 'NoSchedule' }),
    );
    expect(node.metadata?.annotations?.['kwok.x-k8s.io/node']).toBeUndefined();
    expect(node.status?.nodeInfo?.containerRuntimeVersion).toMatch(/^containerd:\/\/2\./);
    expect(node.status?.addresses).toContainEqual({
      type: 'InternalIP',
      address: inject('realNodeAddress'),
    });
  });

  it("returns a container's stdout through pods/log", async () => {
    await core.createNamespacedPod({
      namespace: ns.name,
      body: realNodePod('echo', ['sh', '-c', 'echo hello from a real container; echo second line']),
    });
    await waitForPhase('echo', ['Succeeded']);
    const log = await core.readNamespacedPodLog({ name: 'echo', namespace: ns.name });
    expect(log).toBe('hello from a real container\nsecond line\n');
  });

  describe('exec', () => {
    beforeAll(async () => {
      await core.createNamespacedPod({
        namespace: ns.name,
        body: realNodePod('shell', ['sleep', '3600']),
      });
      await waitForPhase('shell', ['Running']);
    });

    it('kubectl exec -it gets a real TTY, resizes reach the process, the exit code comes back', async () => {
      const kubectl = join(inject('clusterBinDir'), 'kubectl');
      const term = spawnPty(
        kubectl,
        ['--kubeconfig', kubeconfigPath, '-n', ns.name, 'exec', '-it', 'shell', '--', 'sh'],
        { cols: 100, rows: 30, env: { ...process.env, TERM: 'xterm' } },
      );
      try {
        let screen = '';
        term.onData((data) => {
          screen += data;
        });
        const exited = new Promise<number>((resolve) => {
          term.onExit(({ exitCode }) => {
            resolve(exitCode);
          });
        });
        const waitForOutput = (pattern: RegExp) =>
          eventually(
            `${String(pattern)} on the terminal`,
            () => Promise.resolve(pattern.exec(screen) ?? undefined),
            { timeoutMs: 30_000 },
          );

        term.write('tty; echo size=$(stty size)\r');
        await waitForOutput(/size=30 100/);
        expect(screen).toMatch(/\/dev\/pts\/\d+/);

        term.resize(120, 50);
        // The shell sees SIGWINCH and the new size on its terminal.
        await eventually(
          'the new size inside the container',
          async () => {
            term.write('echo resized=$(stty size)\r');
            await new Promise((resolve) => setTimeout(resolve, 300));
            return screen.includes('resized=50 120') ? true : undefined;
          },
          { timeoutMs: 30_000 },
        );

        term.write('exit 7\r');
        expect(await exited).toBe(7);
      } finally {
        // The terminal's file descriptor is released even when an assertion failed.
        term.kill();
      }
    });

    it('a failing command reports its exit code through the API (as the agent reads it)', async () => {
      const status = await new Promise<V1Status>((resolve, reject) => {
        const sink = new Writable({
          write: (_chunk, _enc, done) => {
            done();
          },
        });
        new Exec(kc)
          .exec(
            ns.name,
            'shell',
            'main',
            ['sh', '-c', 'echo out; exit 3'],
            sink,
            sink,
            new PassThrough().end(),
            false,
            resolve,
          )
          .catch(reject);
      });
      expect(status.status).toBe('Failure');
      expect(status.reason).toBe('NonZeroExitCode');
      expect(status.details?.causes).toContainEqual({ reason: 'ExitCode', message: '3' });
    });
  });

  it('a pod reaches the kubernetes Service, as in-cluster clients do', async () => {
    await core.createNamespacedPod({
      namespace: ns.name,
      body: realNodePod('in-cluster', [
        'sh',
        '-c',
        'nc -w 10 "$KUBERNETES_SERVICE_HOST" "$KUBERNETES_SERVICE_PORT" </dev/null && echo reachable; ' +
          'test -s /var/run/secrets/kubernetes.io/serviceaccount/token && echo token',
      ]),
    });
    await waitForPhase('in-cluster', ['Succeeded', 'Failed']);
    const log = await core.readNamespacedPodLog({ name: 'in-cluster', namespace: ns.name });
    expect(log).toBe('reachable\ntoken\n');
  });

  it("a privileged hostPID pod enters the machine's namespaces through a host process", async () => {
    const kubeletPid = inject('realNodeKubeletPid');
    const pod = realNodePod(
      'node-shell',
      ['nsenter', '-t', String(kubeletPid), '-m', '-u', '-i', '-n', '-p', '--', 'hostname'],
      { hostPID: true },
    );
    // nsenter needs CAP_SYS_ADMIN and CAP_SYS_PTRACE over the machine's processes.
    const container = pod.spec?.containers[0];
    if (container !== undefined) container.securityContext = { privileged: true };
    await core.createNamespacedPod({ namespace: ns.name, body: pod });
    await waitForPhase('node-shell', ['Succeeded']);
    const log = await core.readNamespacedPodLog({ name: 'node-shell', namespace: ns.name });
    expect(log.trim()).toBe(machineHostname());
  });
});
