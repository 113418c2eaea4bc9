// The chart installed for real: the images built from the Dockerfiles, imported into the real
// node's containerd, the demo gateway as the peer. One Pod with one container when read-only; two
// containers, two identities and the Unix socket between them when the executor is on; nothing
// left of the executor after an upgrade back, nothing of the release after uninstall. Then the
// same with the single-file manifest and `kubectl apply` (back to read-only with `--prune`, as
// docs/chart.md says). One assertion per claim.
import { join } from 'node:path';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { execFileSync } from 'node:child_process';
import { CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { DemoGateway } from '../../demo-gateway/demo-gateway.js';
import { Gate, GetCapabilitiesResponse } from '../../proto/index.js';
import { CHART_DIR, REPO_ROOT, runHelm } from '../chart/helm.js';
import { REAL_NODE_LABEL, REAL_NODE_TAINT } from '../cluster/node.js';
import { createTestNamespace, eventually, loadKubeConfig } from '../helpers/kube.js';
import {
  getCapabilitiesCall,
  inContainer,
  jwtClaims,
  kubectlFor,
  READ_OWN_TOKEN,
  reviewToken,
  SCAN_READABLE_JWTS,
  SELF_SUBJECT_REVIEW,
  sha256,
  statSocket,
} from './chart-support.js';
import { buildAgentImages, importIntoNode, type BuiltImages } from './images.js';

const TENANT_TOKEN = 'chart-install-tenant-token';
const RELEASE = 'kubexa-agent';
/** The chart's names for release "kubexa-agent" (fullname = release name). */
const COLLECTOR_SA = 'kubexa-agent';
const EXECUTOR_SA = 'kubexa-agent-executor';
/** values.yaml: the executor's user, and the Pod's fsGroup (the group it shares with the collector). */
const EXECUTOR_UID = 65533;
const SHARED_GID = 65532;
const SOCKET = '/run/kubexa/executor/executor.sock';
/** Everything a release can own, namespaced and cluster-wide. */
const RELEASE_KINDS =
  'deployments,replicasets,pods,services,configmaps,secrets,serviceaccounts,roles,rolebindings,persistentvolumeclaims,clusterroles,clusterrolebindings,validatingadmissionpolicies,validatingadmissionpolicybindings';

/**
 * What `kubectl apply --prune` may delete when the read-only manifest replaces the executor's
 * (docs/chart.md): every kind the chart renders, except the Namespace.
 */
const PRUNE_ALLOWLIST = [
  'core/v1/ServiceAccount',
  'core/v1/ConfigMap',
  'core/v1/Service',
  'core/v1/Secret',
  'core/v1/PersistentVolumeClaim',
  'apps/v1/Deployment',
  'rbac.authorization.k8s.io/v1/Role',
  'rbac.authorization.k8s.io/v1/RoleBinding',
  'rbac.authorization.k8s.io/v1/ClusterRole',
  'rbac.authorization.k8s.io/v1/ClusterRoleBinding',
  'admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy',
  'admissionregistration.k8s.io/v1/ValidatingAdmissionPolicyBinding',
];

const kubeconfigPath = inject('kubeconfigPath');
const kc = loadKubeConfig(kubeconfigPath);
const core = kc.makeApiClient(CoreV1Api);
const kubectl = kubectlFor(join(inject('clusterBinDir'), 'kubectl'), kubeconfigPath);
const helm = join(inject('clusterBinDir'), 'helm');

let images: BuiltImages;
let gateway: DemoGateway;
let gatewayAddress: string;
let clusterUid: string;

beforeAll(async () => {
  images = await buildAgentImages((line) => process.stdout.write(`${line}\n`));
  importIntoNode(images, inject('clusterBinDir'), inject('realNodeContainerdSocket'));
  gateway = new DemoGateway({ acceptToken: TENANT_TOKEN }, { logger: pino({ level: 'silent' }) });
  // On the machine's end of the node's veth: pods reach it, nothing outside the machine does.
  const host = inject('realNodeHostAddress');
  gatewayAddress = `${host}:${String(await gateway.listen(host, 0))}`;
  clusterUid = (await core.readNamespace({ name: 'kube-system' })).metadata?.uid ?? '';
}, 1_800_000);

afterAll(async () => {
  await gateway.close();
});

function imageValues(image: string): { repository: string; tag: string; pullPolicy: string } {
  const colon = image.lastIndexOf(':');
  return { repository: image.slice(0, colon), tag: image.slice(colon + 1), pullPolicy: 'Never' };
}

/** Read-only defaults, plus what this cluster needs: the local images, the demo gateway, the node. */
function baseValues(): Record<string, unknown> {
  return {
    secret: { tenantToken: TENANT_TOKEN },
    image: imageValues(images.collector.name),
    executor: { image: imageValues(images.executor.name) },
    // The demo gateway speaks plaintext on the node's veth; the chart wants that acknowledged.
    gateway: { address: gatewayAddress, tls: false, allowInsecure: true },
    // The test cluster has no storage provisioner.
    persistence: { enabled: false },
    nodeSelector: { [REAL_NODE_LABEL]: 'true' },
    tolerations: [{ key: REAL_NODE_TAINT, operator: 'Exists', effect: 'NoSchedule' }],
  };
}

/** The executor on (pod exec), acknowledged as unimplemented: identities and socket only. */
function executorValues(): Record<string, unknown> {
  const base = baseValues();
  return {
    ...base,
    rbac: { exec: true },
    exec: { pod: { enabled: true } },
    executor: { image: imageValues(images.executor.name), renderUnimplemented: true },
  };
}

function valuesFile(values: Record<string, unknown>): { path: string; remove: () => void } {
  const dir = mkdtempSync(join(tmpdir(), 'kubexa-chart-install-'));
  const path = join(dir, 'values.json');
  writeFileSync(path, JSON.stringify(values));
  return {
    path,
    remove: () => {
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function helmWith(
  verb: 'install' | 'upgrade',
  namespace: string,
  values: Record<string, unknown>,
): Promise<void> {
  const file = valuesFile(values);
  try {
    await runHelm(helm, [
      verb,
      RELEASE,
      '--kubeconfig',
      kubeconfigPath,
      CHART_DIR,
      '--namespace',
      namespace,
      '--values',
      file.path,
      '--wait',
      '--timeout',
      '5m',
    ]);
  } finally {
    file.remove();
  }
}

/** The release's one running Pod once every container of it is Ready (and no other Pod is left). */
async function readyPod(namespace: string, instance: string, containers: number): Promise<V1Pod> {
  return eventually(
    `one Ready Pod of ${instance} with ${String(containers)} container(s)`,
    async () => {
      const pods = await core.listNamespacedPod({
        namespace,
        labelSelector: `app.kubernetes.io/instance=${instance}`,
      });
      const [pod, ...others] = pods.items;
      if (pod === undefined || others.length > 0 || pod.metadata?.deletionTimestamp) return;
      if (pod.spec?.containers.length !== containers) return;
      const ready = pod.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True';
      return ready ? pod : undefined;
    },
    { timeoutMs: 300_000, intervalMs: 1_000 },
  ).catch(async (err: unknown) => {
    throw new Error(`${String(err)}\n${await podReport(namespace)}`, { cause: err });
  });
}

/** Events and logs of every Pod in the namespace, for a failure message. */
async function podReport(namespace: string): Promise<string> {
  const out: string[] = [];
  try {
    out.push(await kubectl(['get', 'events', '-n', namespace, '--sort-by=.lastTimestamp']));
    out.push(
      await kubectl([
        'logs',
        '-n',
        namespace,
        '--all-containers',
        '--tail=40',
        '-l',
        'app.kubernetes.io/name=kubexa-agent',
      ]),
    );
  } catch (err: unknown) {
    out.push(String(err));
  }
  return out.join('\n');
}

/** The demo gateway's connected session from this cluster, once it has received messages. */
async function streamingSession() {
  return eventually(
    'a connected session from this cluster that has delivered messages',
    () =>
      Promise.resolve(
        gateway
          .sessions()
          .find((s) => s.state === 'connected' && s.clusterId === clusterUid && s.received > 0),
      ),
    { timeoutMs: 120_000, intervalMs: 500 },
  );
}

/** The demo gateway's connected session from this Pod (its IP), once it has received messages. */
async function streamingSessionFrom(pod: V1Pod) {
  const from = `${pod.status?.podIP ?? '(no IP)'}:`;
  return eventually(
    `a connected session from ${from} that has delivered messages`,
    () =>
      Promise.resolve(
        gateway
          .sessions()
          .find((s) => s.state === 'connected' && s.peer.startsWith(from) && s.received > 0),
      ),
    { timeoutMs: 120_000, intervalMs: 500 },
  );
}

/** Every object of the release (by its instance label), as kind/name. */
async function releaseObjects(instance: string): Promise<string[]> {
  const out = await kubectl([
    'get',
    RELEASE_KINDS,
    '-A',
    '-l',
    `app.kubernetes.io/instance=${instance}`,
    '-o',
    'name',
  ]);
  return out.split('\n').filter((line) => line !== '');
}

async function inPod(namespace: string, pod: V1Pod, container: string, script: string) {
  return inContainer(kubectl, { namespace, pod: pod.metadata?.name ?? '', container }, script);
}

describe('helm install, upgrade and uninstall on the real node', () => {
  let namespace: string;
  let deleteNamespace: () => Promise<void>;
  let twoContainerPod: V1Pod;
  let executorToken: string;
  /** The collector's minted token as the collector container read it while the Pod ran. */
  let collectorToken: string;

  beforeAll(async () => {
    const ns = await createTestNamespace(kc, 'chart-install');
    namespace = ns.name;
    deleteNamespace = () => ns.delete();
  });

  afterAll(async () => {
    await runHelm(helm, [
      'uninstall',
      RELEASE,
      '--kubeconfig',
      kubeconfigPath,
      '--namespace',
      namespace,
    ]).catch(() => undefined);
    await deleteNamespace();
  });

  it('helm install with defaults: one Pod with one container, Ready', async () => {
    await helmWith('install', namespace, baseValues());
    const pod = await readyPod(namespace, RELEASE, 1);
    expect(pod.spec?.containers.map((c) => c.name)).toEqual(['collector']);
  });

  it('the read-only collector streams to the demo gateway, which shows its session', async () => {
    const session = await streamingSession();
    expect(session.clusterId).toBe(clusterUid);
  });

  it('helm upgrade with the executor on: the Pod is recreated with two containers, Ready', async () => {
    await helmWith('upgrade', namespace, executorValues());
    twoContainerPod = await readyPod(namespace, RELEASE, 2);
    expect(twoContainerPod.spec?.containers.map((c) => c.name)).toEqual(['collector', 'executor']);
  });

  it("from inside the collector container, its token authenticates as the collector's ServiceAccount", async () => {
    const review = JSON.parse(
      await inPod(namespace, twoContainerPod, 'collector', SELF_SUBJECT_REVIEW),
    ) as {
      username: string;
    };
    expect(review.username).toBe(`system:serviceaccount:${namespace}:${COLLECTOR_SA}`);
  });

  it("from inside the executor container, its token authenticates as the executor's ServiceAccount", async () => {
    const review = JSON.parse(
      await inPod(namespace, twoContainerPod, 'executor', SELF_SUBJECT_REVIEW),
    ) as {
      username: string;
    };
    expect(review.username).toBe(`system:serviceaccount:${namespace}:${EXECUTOR_SA}`);
  });

  it("the collector container has no readable file holding the executor's token", async () => {
    executorToken = await inPod(namespace, twoContainerPod, 'executor', READ_OWN_TOKEN);
    collectorToken = await inPod(namespace, twoContainerPod, 'collector', READ_OWN_TOKEN);
    const scan = JSON.parse(
      await inPod(namespace, twoContainerPod, 'collector', SCAN_READABLE_JWTS),
    ) as {
      read: number;
      found: { path: string; sha256: string }[];
    };
    // The scan did read the container's files, its own token among them.
    expect(scan.found.map((f) => f.sha256)).toContain(sha256(collectorToken.trim()));
    expect(scan.found.filter((f) => f.sha256 === sha256(executorToken.trim()))).toEqual([]);
  });

  it('the socket is in the shared volume: executor-owned 0660 under the shared group, in a 0750 directory', async () => {
    const modes = JSON.parse(
      await inPod(namespace, twoContainerPod, 'collector', statSocket(SOCKET)),
    ) as unknown;
    expect(modes).toEqual({
      dir: { socket: false, uid: EXECUTOR_UID, gid: SHARED_GID, mode: '750' },
      socket: { socket: true, uid: EXECUTOR_UID, gid: SHARED_GID, mode: '660' },
    });
  });

  it("the collector's call over the socket returns the executor's gates", async () => {
    const answer = JSON.parse(
      await inPod(namespace, twoContainerPod, 'collector', getCapabilitiesCall(SOCKET)),
    ) as { status: string; message: string };
    const capabilities = GetCapabilitiesResponse.decode(Buffer.from(answer.message, 'base64'));
    expect({ status: answer.status, gates: capabilities.enabledGates }).toEqual({
      status: '0',
      gates: [Gate.GATE_POD_EXEC],
    });
  });

  it('no Secret holding a ServiceAccount token exists with the executor on', async () => {
    const secrets = await core.listNamespacedSecret({ namespace });
    expect(secrets.items.map((s) => s.type)).not.toContain('kubernetes.io/service-account-token');
  });

  it('helm upgrade back to read-only: one container again', async () => {
    await helmWith('upgrade', namespace, baseValues());
    const pod = await readyPod(namespace, RELEASE, 1);
    expect(pod.spec?.containers.map((c) => c.name)).toEqual(['collector']);
  });

  it("... and the executor's ServiceAccount, RBAC and every credential object are gone", async () => {
    const objects = await releaseObjects(RELEASE);
    expect(objects.filter((o) => o.includes('executor') || o.includes('token-minter'))).toEqual([]);
  });

  it("the executor's token (projected, bound to the Pod) is refused once the Pod is gone", async () => {
    await eventually(
      'the two-container Pod to be gone',
      async () =>
        core
          .readNamespacedPod({ name: twoContainerPod.metadata?.name ?? '', namespace })
          .then(() => undefined)
          .catch(() => true),
      { timeoutMs: 120_000 },
    );
    const review = await eventually(
      'the API server to refuse the token',
      async () => {
        const r = await reviewToken(kc, executorToken);
        return r.status === 401 ? r : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 1_000 },
    );
    expect(review.status).toBe(401);
  });

  it("the collector's minted token (bound to a Secret the Pod owns) is refused within seconds once the Pod is gone", async () => {
    // The API server cannot bind a token for another ServiceAccount to the Pod, so the executor
    // binds it to an empty Secret the Pod owns; the garbage collector deleted it with the Pod.
    const claims = jwtClaims(collectorToken.trim()) as {
      'kubernetes.io': { secret?: { name: string } };
    };
    expect(claims['kubernetes.io'].secret?.name).toBe(
      `${twoContainerPod.metadata?.name ?? ''}-token-binding`,
    );
    const review = await eventually(
      'the API server to refuse the token',
      async () => {
        const r = await reviewToken(kc, collectorToken);
        return r.status === 401 ? r : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 1_000 },
    );
    expect(review.status).toBe(401);
  });

  it("... the only Secret left is the tenant token's (beside helm's own release records)", async () => {
    const expected = [`Opaque ${RELEASE}-token`];
    const left = async () => {
      const secrets = await core.listNamespacedSecret({ namespace });
      const notHelms = secrets.items.filter((s) => s.type !== 'helm.sh/release.v1');
      return notHelms.map((s) => `${s.type ?? ''} ${s.metadata?.name ?? ''}`);
    };
    // The binding Secret goes with the Pod, by the garbage collector: give it a moment.
    const secrets = await eventually(
      'only the tenant token Secret to be left',
      async () => {
        const names = await left();
        return JSON.stringify(names) === JSON.stringify(expected) ? names : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 1_000 },
    ).catch(left);
    expect(secrets).toEqual(expected);
  });

  it('helm uninstall leaves nothing of the release behind', async () => {
    await runHelm(helm, [
      'uninstall',
      RELEASE,
      '--kubeconfig',
      kubeconfigPath,
      '--namespace',
      namespace,
      '--wait',
    ]);
    const left = await eventually(
      'every object of the release to be deleted',
      async () => ((await releaseObjects(RELEASE)).length === 0 ? [] : undefined),
      { timeoutMs: 120_000, intervalMs: 1_000 },
    ).catch(async () => releaseObjects(RELEASE));
    expect(left).toEqual([]);
  });
});

describe('the single-file manifest with kubectl apply on the real node', () => {
  // Contains the chart's name, so the chart's fullname is the release name.
  const manifestRelease = 'manifest-kubexa-agent';
  let dist: string;
  let namespace: string;
  let twoContainerPod: V1Pod;

  /** scripts/package-chart.sh's dist/kubexa-agent.yaml, rendered with these values. */
  function renderManifest(values: Record<string, unknown>, name: string): string {
    const file = valuesFile({ ...values, secret: undefined });
    try {
      execFileSync(
        'bash',
        [join(REPO_ROOT, 'scripts', 'package-chart.sh'), '--values', file.path],
        {
          env: {
            ...process.env,
            HELM: helm,
            DIST: dist,
            NAMESPACE: namespace,
            RELEASE: manifestRelease,
          },
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      );
    } finally {
      file.remove();
    }
    const path = join(dist, `${name}.yaml`);
    writeFileSync(path, readFileSync(join(dist, 'kubexa-agent.yaml')));
    return path;
  }

  beforeAll(() => {
    dist = mkdtempSync(join(tmpdir(), 'kubexa-manifest-'));
    namespace = `kubexa-manifest-${String(process.pid)}`;
  });

  afterAll(async () => {
    for (const name of ['executor', 'read-only']) {
      await kubectl([
        'delete',
        '--ignore-not-found',
        '--wait=false',
        '-f',
        join(dist, `${name}.yaml`),
      ]).catch(() => undefined);
    }
    rmSync(dist, { recursive: true, force: true });
  });

  it('kubectl apply of the read-only manifest: one Pod with one container, Ready', async () => {
    const manifest = renderManifest(baseValues(), 'read-only');
    await kubectl(['apply', '-f', manifest]);
    await kubectl([
      'create',
      'secret',
      'generic',
      `${manifestRelease}-token`,
      '-n',
      namespace,
      `--from-literal=tenant-token=${TENANT_TOKEN}`,
    ]);
    const pod = await readyPod(namespace, manifestRelease, 1);
    expect(pod.spec?.containers.map((c) => c.name)).toEqual(['collector']);
  });

  it('the read-only collector streams to the demo gateway, which shows the session from its Pod', async () => {
    const pod = await readyPod(namespace, manifestRelease, 1);
    const session = await streamingSessionFrom(pod);
    expect(session.clusterId).toBe(clusterUid);
  });

  it('kubectl apply of the manifest with the executor on: two containers, Ready', async () => {
    await kubectl(['apply', '-f', renderManifest(executorValues(), 'executor')]);
    twoContainerPod = await readyPod(namespace, manifestRelease, 2);
    expect(twoContainerPod.spec?.containers.map((c) => c.name)).toEqual(['collector', 'executor']);
  });

  it('from inside each container, its token authenticates as its own ServiceAccount', async () => {
    const identities = await Promise.all(
      ['collector', 'executor'].map(async (container) => {
        const review = JSON.parse(
          await inPod(namespace, twoContainerPod, container, SELF_SUBJECT_REVIEW),
        ) as { username: string };
        return review.username;
      }),
    );
    expect(identities).toEqual([
      `system:serviceaccount:${namespace}:${manifestRelease}`,
      `system:serviceaccount:${namespace}:${manifestRelease}-executor`,
    ]);
  });

  it("the collector container has no readable file holding the executor's token", async () => {
    const executorToken = await inPod(namespace, twoContainerPod, 'executor', READ_OWN_TOKEN);
    const scan = JSON.parse(
      await inPod(namespace, twoContainerPod, 'collector', SCAN_READABLE_JWTS),
    ) as { found: { path: string; sha256: string }[] };
    expect(scan.found.filter((f) => f.sha256 === sha256(executorToken.trim()))).toEqual([]);
  });

  it('the socket is in the shared volume: executor-owned 0660 under the shared group, in a 0750 directory', async () => {
    const modes = JSON.parse(
      await inPod(namespace, twoContainerPod, 'collector', statSocket(SOCKET)),
    ) as unknown;
    expect(modes).toEqual({
      dir: { socket: false, uid: EXECUTOR_UID, gid: SHARED_GID, mode: '750' },
      socket: { socket: true, uid: EXECUTOR_UID, gid: SHARED_GID, mode: '660' },
    });
  });

  it('kubectl apply --prune of the read-only manifest (docs/chart.md): one container again', async () => {
    await kubectl([
      'apply',
      '-f',
      join(dist, 'read-only.yaml'),
      '--prune',
      '-l',
      `app.kubernetes.io/instance=${manifestRelease}`,
      ...PRUNE_ALLOWLIST.map((kind) => `--prune-allowlist=${kind}`),
    ]);
    const pod = await readyPod(namespace, manifestRelease, 1);
    expect(pod.spec?.containers.map((c) => c.name)).toEqual(['collector']);
  });

  it("... and the executor's ServiceAccount, RBAC and admission policy are gone", async () => {
    const objects = await releaseObjects(manifestRelease);
    expect(objects.filter((o) => o.includes('executor'))).toEqual([]);
  });

  it('kubectl delete -f leaves nothing of it behind', async () => {
    for (const name of ['executor', 'read-only']) {
      await kubectl([
        'delete',
        '--ignore-not-found',
        '--wait=true',
        '-f',
        join(dist, `${name}.yaml`),
      ]);
    }
    const left = await eventually(
      'every object of the manifest to be deleted',
      async () => ((await releaseObjects(manifestRelease)).length === 0 ? [] : undefined),
      { timeoutMs: 120_000, intervalMs: 1_000 },
    ).catch(async () => releaseObjects(manifestRelease));
    expect(left).toEqual([]);
  });
});
