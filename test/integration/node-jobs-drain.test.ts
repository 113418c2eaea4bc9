// Drain against kubectl drain as the reference, on the real API server: two kwok nodes built
// identically (a Deployment pod, a bare pod, a DaemonSet pod, a pod with emptyDir, a mirror-like
// pod, a pod behind a blocking PodDisruptionBudget, and "the agent's own" pod), kubectl drains
// one, the executor the other, with the same options, and the evicted, skipped and refused sets
// and the cordon state are compared. The executor runs in this process on a real Unix socket
// with a ServiceAccount bound to exactly the chart's rbac.nodeOps grants; the test client talks
// straight to its socket, as the collector (or a compromised one) would.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import {
  AppsV1Api,
  CoreV1Api,
  PolicyV1Api,
  type V1Node,
  type V1Pod,
  type V1PodSpec,
} from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { NodeJobOutcome, PodPhase, RefusalCode } from '../../proto/index.js';
import {
  createTestNamespace,
  eventually,
  loadKubeConfig,
  TEST_LABEL,
  uniqueName,
  type TestNamespace,
} from '../helpers/kube.js';
import {
  removeServiceAccountGrants,
  serviceAccountKubeConfig,
  startTestExecutor,
  type TestExecutor,
} from '../helpers/node-job-executor.js';

const execFileAsync = promisify(execFile);
const kubeconfigPath = inject('kubeconfigPath');
const binDir = inject('clusterBinDir');
const kc = loadKubeConfig(kubeconfigPath);
const core = kc.makeApiClient(CoreV1Api);
const apps = kc.makeApiClient(AppsV1Api);
const policy = kc.makeApiClient(PolicyV1Api);

const TAINT_KEY = 'kubexa.io/drain-test';
const ROLE = 'kubexa.io/drain-role';
/** Exactly the chart's rbac.nodeOps grants (helm/kubexa-agent/templates/executor-rbac.yaml). */
const NODE_OPS_RULES = [
  { apiGroups: [''], resources: ['nodes'], verbs: ['get', 'patch'] },
  { apiGroups: [''], resources: ['pods'], verbs: ['list'] },
  { apiGroups: [''], resources: ['pods/eviction'], verbs: ['create'] },
  { apiGroups: ['apps'], resources: ['daemonsets'], verbs: ['get'] },
];

const fixture = uniqueName('drain');
let ns: TestNamespace;
let executorKc: ReturnType<typeof loadKubeConfig>;
const nodesMade: string[] = [];

const kubectl = (args: readonly string[]) =>
  execFileAsync(join(binDir, 'kubectl'), ['--kubeconfig', kubeconfigPath, ...args], {
    maxBuffer: 16 * 1024 * 1024,
  }).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (err: unknown) => {
      // execFile's error carries the exit code and both outputs.
      const failed = err as { code?: number; stdout?: string; stderr?: string };
      return { code: failed.code ?? 1, stdout: failed.stdout ?? '', stderr: failed.stderr ?? '' };
    },
  );

/** A node for this file; `managed: false` has no kubelet at all (its pods never go away by themselves). */
async function makeNode(prefix: string, managed = true, daemonSet = false): Promise<string> {
  const name = uniqueName(`${fixture}-${prefix}`);
  const body: V1Node = {
    metadata: {
      name,
      annotations: managed
        ? { 'kwok.x-k8s.io/node': 'fake', 'node.alpha.kubernetes.io/ttl': '0' }
        : {},
      labels: {
        type: 'kwok-drain',
        'kubernetes.io/hostname': name,
        [TEST_LABEL]: 'true',
        ...(daemonSet ? { 'kubexa.io/drain-fixture': fixture } : {}),
      },
    },
    // Other tests' pods stay off these nodes; this file's pods tolerate the taint.
    spec: { taints: [{ key: TAINT_KEY, value: 'true', effect: 'NoSchedule' }] },
    status: {
      addresses: [{ type: 'InternalIP', address: '127.0.0.1' }],
      allocatable: { cpu: '32', memory: '256Gi', pods: '110' },
      capacity: { cpu: '32', memory: '256Gi', pods: '110' },
    },
  };
  await core.createNode({ body });
  nodesMade.push(name);
  if (managed) {
    await eventually(
      `node ${name} Ready`,
      async () => {
        const node = await core.readNode({ name });
        return node.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')
          ? true
          : undefined;
      },
      { timeoutMs: 60_000 },
    );
  }
  return name;
}

const podSpec = (node: string, extra: Partial<V1PodSpec> = {}): V1PodSpec => ({
  containers: [{ name: 'app', image: 'registry.invalid/app:1' }],
  tolerations: [{ key: TAINT_KEY, operator: 'Exists' }],
  nodeSelector: { 'kubernetes.io/hostname': node },
  terminationGracePeriodSeconds: 1,
  ...extra,
});

async function deployment(
  name: string,
  node: string,
  role: string,
  extra: Partial<V1PodSpec> = {},
) {
  await apps.createNamespacedDeployment({
    namespace: ns.name,
    body: {
      metadata: { name },
      spec: {
        replicas: 1,
        selector: { matchLabels: { app: name } },
        template: { metadata: { labels: { app: name, [ROLE]: role } }, spec: podSpec(node, extra) },
      },
    },
  });
}

async function barePod(
  name: string,
  node: string,
  role: string,
  annotations: Record<string, string> = {},
) {
  await core.createNamespacedPod({
    namespace: ns.name,
    body: {
      metadata: { name, labels: { [ROLE]: role }, annotations },
      spec: podSpec(node, { nodeName: node, automountServiceAccountToken: false }),
    },
  });
}

async function guardedDeployment(name: string, node: string) {
  await deployment(name, node, 'pdb');
  await policy.createNamespacedPodDisruptionBudget({
    namespace: ns.name,
    body: {
      metadata: { name: `${name}-pdb` },
      spec: { minAvailable: 1, selector: { matchLabels: { app: name } } },
    },
  });
}

async function podsOn(node: string): Promise<V1Pod[]> {
  const list = await core.listPodForAllNamespaces({ fieldSelector: `spec.nodeName=${node}` });
  return list.items;
}

const roleOf = (pod: V1Pod) => pod.metadata?.labels?.[ROLE] ?? '?';

/** Waits until every pod on the node is Running and the node has `count` of them. */
async function settled(node: string, count: number): Promise<V1Pod[]> {
  return eventually(
    `${String(count)} running pods on ${node}`,
    async () => {
      const pods = await podsOn(node);
      const running = pods.filter(
        (pod) => pod.status?.phase === 'Running' && pod.metadata?.deletionTimestamp === undefined,
      );
      return running.length === count && pods.length === count ? pods : undefined;
    },
    { timeoutMs: 90_000, intervalMs: 500 },
  );
}

/** Waits for a PDB's status to say it allows no disruption (the disruption controller saw it). */
async function pdbBlocks(name: string): Promise<void> {
  await eventually(
    `PDB ${name} computed`,
    async () => {
      const pdb = await policy.readNamespacedPodDisruptionBudget({ name, namespace: ns.name });
      return pdb.status?.observedGeneration === pdb.metadata?.generation &&
        pdb.status?.currentHealthy === 1
        ? true
        : undefined;
    },
    { timeoutMs: 60_000 },
  );
}

const sorted = (values: Iterable<string>) => [...values].sort();
const isCordoned = async (node: string) =>
  (await core.readNode({ name: node })).spec?.unschedulable === true;

beforeAll(async () => {
  ns = await createTestNamespace(kc, 'node-jobs');
  executorKc = await serviceAccountKubeConfig(kc, ns.name, 'executor', NODE_OPS_RULES);
});

afterAll(async () => {
  for (const name of nodesMade) await core.deleteNode({ name }).catch(() => undefined);
  await removeServiceAccountGrants(kc, ns.name, 'executor');
  await ns.delete();
});

const DRAIN_CONFIG = (nodes: string, maxTimeoutSec = 120) => `
mutate:
  node:
    enabled: true
    nodes: [${nodes}]
    verbs: [cordon, uncordon, drain]
    max_timeout_sec: ${String(maxTimeoutSec)}
`;

describe('drain, compared with kubectl drain on an identical node', () => {
  let reference = '';
  let ours = '';
  let executor: TestExecutor;
  const roles = new Map<string, string>();

  beforeAll(async () => {
    reference = await makeNode('kubectl', true, true);
    ours = await makeNode('executor', true, true);
    for (const [node, s] of [
      [reference, 'a'],
      [ours, 'b'],
    ] as const) {
      await deployment(`web-${s}`, node, 'deployment');
      await deployment(`cache-${s}`, node, 'emptydir', {
        volumes: [{ name: 'scratch', emptyDir: {} }],
      });
      await guardedDeployment(`guarded-${s}`, node);
      await deployment(`agent-${s}`, node, 'self');
      await barePod(`bare-${s}`, node, 'bare');
      await barePod(`mirror-${s}`, node, 'mirror', {
        'kubernetes.io/config.mirror': 'mirror-hash',
      });
    }
    await apps.createNamespacedDaemonSet({
      namespace: ns.name,
      body: {
        metadata: { name: 'ds' },
        spec: {
          selector: { matchLabels: { app: 'ds' } },
          template: {
            metadata: { labels: { app: 'ds', [ROLE]: 'ds' } },
            spec: {
              containers: [{ name: 'app', image: 'registry.invalid/ds:1' }],
              tolerations: [{ key: TAINT_KEY, operator: 'Exists' }],
              nodeSelector: { 'kubexa.io/drain-fixture': fixture },
            },
          },
        },
      },
    });
    for (const node of [reference, ours]) {
      for (const pod of await settled(node, 7)) roles.set(pod.metadata?.name ?? '', roleOf(pod));
    }
    await pdbBlocks('guarded-a-pdb');
    await pdbBlocks('guarded-b-pdb');
    const self = (await podsOn(ours)).find((pod) => roleOf(pod) === 'self');
    executor = await startTestExecutor({
      kc: executorKc,
      configYaml: DRAIN_CONFIG(`${ours}, ${reference}`),
      self: { namespace: ns.name, name: self?.metadata?.name ?? '' },
    });
  });

  afterAll(async () => {
    await executor.close();
  });

  it('refuses the same pods without force and emptyDir options; the executor changes nothing, kubectl cordons first', async () => {
    const [ref, run] = await Promise.all([
      kubectl([
        'drain',
        reference,
        '--ignore-daemonsets',
        `--pod-selector=${ROLE}!=self`,
        '--timeout=30s',
      ]),
      executor.runJob(
        executor.nodeJob(ours, 'drain', {
          drain: { force: false, deleteEmptydirData: false, timeoutSeconds: 30, podSelector: '' },
        }),
      ),
    ]);
    expect(ref.code).not.toBe(0);
    const refRefused = new Set<string>();
    for (const line of `${ref.stdout}\n${ref.stderr}`
      .split('\n')
      .filter((l) => l.includes('cannot delete'))) {
      for (const match of line.matchAll(new RegExp(`${ns.name}/([a-z0-9-]+)`, 'g')))
        refRefused.add(roles.get(match[1] ?? '') ?? '?');
    }
    const ourRefused = run.pods.filter((p) => p.phase === PodPhase.POD_PHASE_REFUSED);
    expect(sorted(refRefused)).toEqual(['bare', 'emptydir']);
    expect(sorted(ourRefused.map((p) => roles.get(p.name) ?? '?'))).toEqual(sorted(refRefused));
    expect(sorted(ourRefused.map((p) => p.reason))).toEqual(['needs_emptydir', 'needs_force']);
    expect(run.result.outcome).toBe(NodeJobOutcome.NODE_JOB_OUTCOME_REFUSED);
    expect(run.result.refusal?.code).toBe(RefusalCode.REFUSAL_CODE_DRAIN_NEEDS_OPTIONS);
    // The one deliberate difference (the seed): a refused drain has changed nothing.
    expect(await isCordoned(ours)).toBe(false);
    expect(await isCordoned(reference)).toBe(true);
    expect((await podsOn(ours)).length).toBe(7);
    expect((await podsOn(reference)).length).toBe(7);
    await kubectl(['uncordon', reference]);
  });

  it('evicts and skips the same pods as kubectl --ignore-daemonsets --force --delete-emptydir-data, and both time out on the PDB', async () => {
    const [ref, run] = await Promise.all([
      kubectl([
        'drain',
        reference,
        '--ignore-daemonsets',
        '--force',
        '--delete-emptydir-data',
        `--pod-selector=${ROLE}!=self`,
        '--timeout=20s',
      ]),
      executor.runJob(
        executor.nodeJob(ours, 'drain', {
          drain: { force: true, deleteEmptydirData: true, timeoutSeconds: 20, podSelector: '' },
        }),
      ),
    ]);
    const refOutput = `${ref.stdout}\n${ref.stderr}`;
    const refEvicted = new Set<string>();
    for (const match of refOutput.matchAll(/pod\/([a-z0-9-]+) evicted/g))
      refEvicted.add(roles.get(match[1] ?? '') ?? '?');
    const ourEvicted = new Set(
      run.pods
        .filter((p) => p.phase === PodPhase.POD_PHASE_EVICTED)
        .map((p) => roles.get(p.name) ?? '?'),
    );
    expect(sorted(refEvicted)).toEqual(['bare', 'deployment', 'emptydir']);
    expect(sorted(ourEvicted)).toEqual(sorted(refEvicted));
    // Both wait on the PodDisruptionBudget until the timeout.
    expect(ref.code).not.toBe(0);
    expect(refOutput).toMatch(/disruption budget/);
    expect(run.result.outcome).toBe(NodeJobOutcome.NODE_JOB_OUTCOME_TIMED_OUT);
    const blocked = run.pods.filter((p) => p.phase === PodPhase.POD_PHASE_BLOCKED_BY_PDB);
    expect(blocked.length).toBeGreaterThan(0);
    expect(new Set(blocked.map((p) => p.pdb))).toEqual(new Set(['guarded-b-pdb']));
    expect(run.result.pending.map((key) => roles.get(key.split('/')[1] ?? ''))).toEqual(['pdb']);
    // kubectl skips DaemonSet and mirror pods silently or with a warning; the executor says why.
    expect(refOutput).toMatch(/ignoring DaemonSet-managed Pods/);
    const skipped = Object.fromEntries(
      run.pods
        .filter((p) => p.phase === PodPhase.POD_PHASE_SKIPPED)
        .map((p) => [roles.get(p.name) ?? '?', p.reason]),
    );
    expect(skipped).toEqual({ ds: 'daemonset', mirror: 'mirror', self: 'agent_self' });
    // What is left on each node, and the cordon, are the same.
    const left = async (node: string) =>
      sorted(
        (await podsOn(node)).filter((p) => p.metadata?.deletionTimestamp === undefined).map(roleOf),
      );
    const refLeft = await eventually(
      'kubectl node settled',
      async () => {
        const l = await left(reference);
        return l.length === 4 ? l : undefined;
      },
      { timeoutMs: 30_000 },
    );
    expect(refLeft).toEqual(['ds', 'mirror', 'pdb', 'self']);
    expect(await left(ours)).toEqual(refLeft);
    expect(await isCordoned(reference)).toBe(true);
    expect(await isCordoned(ours)).toBe(true);
    expect(run.result.cordoned).toBe(true);
    // The audit record names who asked and how it ended.
    expect(run.result.audit).toMatchObject({
      principal: 'ops@example.com',
      verb: 'drain',
      outcome: 'timed_out',
    });
  });
});

describe('drain: budgets that unblock, cancel, one job at a time, dry run, terminating pods', () => {
  let executor: TestExecutor;
  const prefix = `${fixture}-s`;

  beforeAll(async () => {
    executor = await startTestExecutor({
      kc: executorKc,
      configYaml: DRAIN_CONFIG(`"${prefix}*"`),
    });
  });

  afterAll(async () => {
    await executor.close();
  });

  it('evicts a pod once its PodDisruptionBudget stops blocking mid-drain', async () => {
    const node = await makeNode('s-pdb');
    await guardedDeployment(`late-${node.slice(-8)}`, node);
    await settled(node, 1);
    const pdbName = `late-${node.slice(-8)}-pdb`;
    await pdbBlocks(pdbName);
    let unblocked = false;
    const run = await executor.runJob(
      executor.nodeJob(node, 'drain', {
        drain: { force: false, deleteEmptydirData: false, timeoutSeconds: 90, podSelector: '' },
      }),
      (pod) => {
        if (pod.phase === PodPhase.POD_PHASE_BLOCKED_BY_PDB && !unblocked) {
          unblocked = true;
          void policy.patchNamespacedPodDisruptionBudget({
            name: pdbName,
            namespace: ns.name,
            body: [{ op: 'replace', path: '/spec/minAvailable', value: 0 }],
          });
        }
      },
    );
    const phases = run.pods.map((p) => p.phase);
    expect(phases[0]).toBe(PodPhase.POD_PHASE_EVICTING);
    expect(phases).toContain(PodPhase.POD_PHASE_BLOCKED_BY_PDB);
    expect(run.pods.find((p) => p.phase === PodPhase.POD_PHASE_BLOCKED_BY_PDB)?.pdb).toBe(pdbName);
    expect(phases.indexOf(PodPhase.POD_PHASE_EVICTED)).toBeGreaterThan(
      phases.indexOf(PodPhase.POD_PHASE_BLOCKED_BY_PDB),
    );
    expect(phases.at(-1)).toBe(PodPhase.POD_PHASE_DELETED);
    expect(run.result.outcome).toBe(NodeJobOutcome.NODE_JOB_OUTCOME_SUCCEEDED);
    expect(await podsOn(node)).toHaveLength(0);
  });

  it('is cancelled by CancelNodeJob, refuses a second job meanwhile, and leaves the node cordoned', async () => {
    const node = await makeNode('s-cancel');
    await guardedDeployment(`held-${node.slice(-8)}`, node);
    await settled(node, 1);
    await pdbBlocks(`held-${node.slice(-8)}-pdb`);
    const request = executor.nodeJob(node, 'drain', {
      drain: { force: false, deleteEmptydirData: false, timeoutSeconds: 0, podSelector: '' },
    });
    let second: Promise<JobRunLike> | undefined;
    const run = await executor.runJob(request, (pod) => {
      if (pod.phase !== PodPhase.POD_PHASE_BLOCKED_BY_PDB || second !== undefined) return;
      second = executor.runJob(executor.nodeJob(node, 'cordon')).then(async (r) => {
        expect(await executor.cancelJob(request.requestId)).toBe(true);
        return r;
      });
    });
    const refusedSecond = await second;
    expect(refusedSecond?.result.refusal?.code).toBe(RefusalCode.REFUSAL_CODE_LIMIT_REACHED);
    expect(run.started?.timeoutSeconds).toBe(120); // 0 means the configured maximum
    expect(run.result.outcome).toBe(NodeJobOutcome.NODE_JOB_OUTCOME_CANCELLED);
    expect(run.result.pending).toHaveLength(1);
    expect(run.result.cordoned).toBe(true);
    expect(await isCordoned(node)).toBe(true);
    expect(await podsOn(node)).toHaveLength(1);
    expect(await executor.cancelJob(request.requestId)).toBe(false);
  });

  it('dry run: every write is checked by the API server and nothing changes', async () => {
    const node = await makeNode('s-dry');
    const s = node.slice(-8);
    await deployment(`dry-web-${s}`, node, 'deployment');
    await deployment(`dry-cache-${s}`, node, 'emptydir', {
      volumes: [{ name: 'scratch', emptyDir: {} }],
    });
    await barePod(`dry-bare-${s}`, node, 'bare');
    await settled(node, 3);
    const versions = async () => {
      const pods = await podsOn(node);
      const nodeObject = await core.readNode({ name: node });
      return {
        node: nodeObject.metadata?.resourceVersion,
        pods: Object.fromEntries(
          pods.map((p): [string, string] => [
            p.metadata?.name ?? '',
            p.metadata?.resourceVersion ?? '',
          ]),
        ),
      };
    };
    const before = await versions();
    const run = await executor.runJob(
      executor.nodeJob(node, 'drain', {
        dryRun: true,
        drain: { force: true, deleteEmptydirData: true, timeoutSeconds: 30, podSelector: '' },
      }),
    );
    expect(run.result.outcome).toBe(NodeJobOutcome.NODE_JOB_OUTCOME_SUCCEEDED);
    const evicted = run.pods.filter((p) => p.phase === PodPhase.POD_PHASE_EVICTED);
    expect(evicted).toHaveLength(3);
    expect(new Set(evicted.map((p) => p.reason))).toEqual(new Set(['dry_run']));
    expect(run.pods.some((p) => p.phase === PodPhase.POD_PHASE_DELETED)).toBe(false);
    expect(run.result.cordoned).toBe(false);
    expect(await versions()).toEqual(before);
    const cordon = await executor.runJob(executor.nodeJob(node, 'cordon', { dryRun: true }));
    expect(cordon.result.outcome).toBe(NodeJobOutcome.NODE_JOB_OUTCOME_SUCCEEDED);
    expect(await versions()).toEqual(before);
  });

  it('evicts with the requested grace period: the API server records it on the pod', async () => {
    // A node without a kubelet: the evicted pod stays terminating, showing the grace period its
    // eviction carried (kubectl's --grace-period), not the pod's own (1 s in podSpec).
    const node = await makeNode('s-grace', false);
    const name = `graceful-${node.slice(-8)}`;
    await barePod(name, node, 'bare');
    let recorded: number | undefined;
    let read: Promise<void> | undefined;
    const run = await executor.runJob(
      executor.nodeJob(node, 'drain', {
        drain: {
          force: true,
          deleteEmptydirData: false,
          gracePeriodSeconds: 17,
          timeoutSeconds: 60,
          podSelector: '',
        },
      }),
      (pod) => {
        if (pod.phase !== PodPhase.POD_PHASE_EVICTED || read !== undefined) return;
        read = core.readNamespacedPod({ name, namespace: ns.name }).then(async (evicted) => {
          recorded = evicted.metadata?.deletionGracePeriodSeconds;
          // Then gone, as a kubelet would make it, so the drain can finish.
          await core.deleteNamespacedPod({ name, namespace: ns.name, gracePeriodSeconds: 0 });
        });
      },
    );
    await read;
    expect(recorded).toBe(17);
    expect(run.pods.map((p) => p.phase)).toEqual([
      PodPhase.POD_PHASE_EVICTING,
      PodPhase.POD_PHASE_EVICTED,
      PodPhase.POD_PHASE_DELETED,
    ]);
    expect(run.result.outcome).toBe(NodeJobOutcome.NODE_JOB_OUTCOME_SUCCEEDED);
  });

  it('caps a timeout above mutate.node.max_timeout_sec at that maximum, and times out there', async () => {
    const capped = await startTestExecutor({
      kc: executorKc,
      configYaml: DRAIN_CONFIG(`"${prefix}*"`, 30),
    });
    try {
      const node = await makeNode('s-cap');
      const app = `capped-${node.slice(-8)}`;
      await guardedDeployment(app, node);
      await settled(node, 1);
      await pdbBlocks(`${app}-pdb`);
      const request = capped.nodeJob(node, 'drain', {
        drain: { force: false, deleteEmptydirData: false, timeoutSeconds: 3600, podSelector: '' },
      });
      // An uncapped drain would wait on the PDB for an hour: cancelled well past the cap.
      const backstop = setTimeout(() => void capped.cancelJob(request.requestId), 60_000);
      const startedAt = Date.now();
      const run = await capped.runJob(request).finally(() => {
        clearTimeout(backstop);
      });
      const elapsedMs = Date.now() - startedAt;
      expect(run.started?.timeoutSeconds).toBe(30);
      expect(run.result.outcome).toBe(NodeJobOutcome.NODE_JOB_OUTCOME_TIMED_OUT);
      expect(elapsedMs).toBeGreaterThanOrEqual(29_000);
      expect(elapsedMs).toBeLessThan(50_000);
      expect(run.result.pending).toEqual([`${ns.name}/${run.pods[0]?.name ?? ''}`]);
    } finally {
      await capped.close();
    }
  });

  it('waits for a pod that is already terminating instead of evicting it again', async () => {
    // A node without a kubelet: a deleted pod stays terminating until the test removes it.
    const node = await makeNode('s-term', false);
    const name = `going-${node.slice(-8)}`;
    await barePod(name, node, 'bare');
    await core.deleteNamespacedPod({ name, namespace: ns.name, gracePeriodSeconds: 300 });
    await eventually(
      'the pod terminating',
      async () =>
        (await podsOn(node))[0]?.metadata?.deletionTimestamp === undefined ? undefined : true,
      { timeoutMs: 10_000 },
    );
    const run = await executor.runJob(
      executor.nodeJob(node, 'drain', {
        drain: { force: true, deleteEmptydirData: false, timeoutSeconds: 60, podSelector: '' },
      }),
      (pod) => {
        if (pod.phase === PodPhase.POD_PHASE_TERMINATING) {
          void core.deleteNamespacedPod({ name, namespace: ns.name, gracePeriodSeconds: 0 });
        }
      },
    );
    const phases = run.pods.map((p) => p.phase);
    expect(phases).toEqual([PodPhase.POD_PHASE_TERMINATING, PodPhase.POD_PHASE_DELETED]);
    expect(run.result.outcome).toBe(NodeJobOutcome.NODE_JOB_OUTCOME_SUCCEEDED);
  });
});

type JobRunLike = Awaited<ReturnType<TestExecutor['runJob']>>;
