// Every refusal of node jobs, sent straight to the executor's socket as a compromised collector
// would send it: no signature, another key, a command for another node or verb, a replay, the
// gate off, a verb or node outside mutate.node, no RBAC (the API server's own answer to the
// executor's ServiceAccount), a node that does not exist, a malformed request. Each one leaves
// the node as it was.
import { CoreV1Api, type V1Node } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { NodeJobOutcome, RefusalCode } from '../../proto/index.js';
import { generateCommandKeyPair, signCommand } from '../../shared/signed-command/sign-command.js';
import {
  createTestNamespace,
  eventually,
  loadKubeConfig,
  TEST_LABEL,
  uniqueName,
  type TestNamespace,
} from '../helpers/kube.js';
import {
  KEY_ID,
  removeServiceAccountGrants,
  requestId,
  serviceAccountKubeConfig,
  startTestExecutor,
  type TestExecutor,
} from '../helpers/node-job-executor.js';

const kc = loadKubeConfig(inject('kubeconfigPath'));
const core = kc.makeApiClient(CoreV1Api);
const NODE_OPS_RULES = [
  { apiGroups: [''], resources: ['nodes'], verbs: ['get', 'patch'] },
  { apiGroups: [''], resources: ['pods'], verbs: ['list'] },
  { apiGroups: [''], resources: ['pods/eviction'], verbs: ['create'] },
  { apiGroups: ['apps'], resources: ['daemonsets'], verbs: ['get'] },
];

let ns: TestNamespace;
const prefix = uniqueName('refuse');
const node = `${prefix}-n1`;
const outsider = uniqueName('elsewhere');
let executor: TestExecutor;
let gateOff: TestExecutor;
let noRbac: TestExecutor;
let noNodes: TestExecutor;

const config = (enabled: boolean, nodes: string) => `
mutate:
  node:
    enabled: ${String(enabled)}
    nodes: ${nodes}
    verbs: [cordon, drain]
`;

async function makeNode(name: string): Promise<void> {
  const body: V1Node = {
    metadata: { name, labels: { [TEST_LABEL]: 'true' } },
    spec: { taints: [{ key: 'kubexa.io/drain-test', value: 'true', effect: 'NoSchedule' }] },
  };
  await core.createNode({ body });
}

/**
 * What a refused job must leave as it was: the cordon, the node's own taints, and every write
 * recorded in managedFields except the node lifecycle controller's. Not the resourceVersion: the
 * controller taints a node that never reports Ready whenever its grace periods run out (seen in
 * CI: the version moved between two reads of a refusal nobody acted on).
 */
const nodeState = async (name: string) => {
  const n = await core.readNode({ name });
  return {
    unschedulable: n.spec?.unschedulable === true,
    taints: (n.spec?.taints ?? [])
      .filter((t) => !t.key.startsWith('node.kubernetes.io/'))
      .map((t) => `${t.key}=${t.value ?? ''}:${t.effect}`),
    writes: (n.metadata?.managedFields ?? [])
      .filter((m) => m.manager !== 'kube-controller-manager')
      .map(
        (m) =>
          `${m.manager ?? ''} ${m.operation ?? ''} ${String(m.time)} ${JSON.stringify(m.fieldsV1)}`,
      ),
    rv: n.metadata?.resourceVersion,
  };
};

/**
 * Waits until nobody else writes the node (the node lifecycle controller taints a new node that
 * never reports Ready): the refusal tests compare its resourceVersion before and after.
 */
async function quietNode(name: string): Promise<void> {
  await eventually(
    `node ${name} left alone by the controllers`,
    async () => {
      const first = await nodeState(name);
      await new Promise((resolve) => setTimeout(resolve, 2_000));
      return (await nodeState(name)).rv === first.rv ? true : undefined;
    },
    { timeoutMs: 60_000 },
  );
}

beforeAll(async () => {
  ns = await createTestNamespace(kc, 'node-refusals');
  await makeNode(node);
  await makeNode(outsider);
  await Promise.all([quietNode(node), quietNode(outsider)]);
  const allowed = await serviceAccountKubeConfig(kc, ns.name, 'executor', NODE_OPS_RULES);
  const nobody = await serviceAccountKubeConfig(kc, ns.name, 'nobody', []);
  executor = await startTestExecutor({ kc: allowed, configYaml: config(true, `["${prefix}-*"]`) });
  gateOff = await startTestExecutor({ kc: allowed, configYaml: config(false, `["${prefix}-*"]`) });
  noRbac = await startTestExecutor({ kc: nobody, configYaml: config(true, `["${prefix}-*"]`) });
  noNodes = await startTestExecutor({ kc: allowed, configYaml: config(true, '[]') });
});

afterAll(async () => {
  for (const e of [executor, gateOff, noRbac, noNodes]) await e.close();
  for (const name of [node, outsider]) await core.deleteNode({ name }).catch(() => undefined);
  await removeServiceAccountGrants(kc, ns.name, 'executor');
  await ns.delete();
});

describe('node job refusals, straight to the socket', () => {
  const refusalOf = async (e: TestExecutor, request: Parameters<TestExecutor['runJob']>[0]) => {
    const before = await nodeState(request.node === '' ? node : request.node).catch(
      () => undefined,
    );
    const run = await e.runJob(request);
    expect(run.result.outcome).toBe(NodeJobOutcome.NODE_JOB_OUTCOME_REFUSED);
    expect(run.started).toBeUndefined();
    expect(run.pods).toEqual([]);
    if (before !== undefined) {
      const after = await nodeState(request.node === '' ? node : request.node);
      expect({ ...after, rv: undefined }).toEqual({ ...before, rv: undefined });
    }
    return run.result.refusal;
  };

  it('refuses a request without a signed command', async () => {
    const request = { ...executor.nodeJob(node, 'cordon'), command: { jws: '' } };
    expect((await refusalOf(executor, request))?.code).toBe(
      RefusalCode.REFUSAL_CODE_SIGNATURE_INVALID,
    );
  });

  it('refuses a command signed by a key the executor does not hold', async () => {
    const stranger = generateCommandKeyPair();
    const request = executor.nodeJob(node, 'cordon');
    const now = Math.floor(Date.now() / 1000);
    const jws = signCommand(
      {
        request_id: request.requestId,
        principal: 'mallory@example.com',
        permission: 'cluster:node_write',
        target: { kind: 'node', namespace: '', name: node, container: '', resource: '' },
        verb: 'cordon',
        iat: now,
        exp: now + 60,
        nonce: 'n'.repeat(22),
      },
      { keyId: KEY_ID, privateKey: stranger.privateKeyPem },
    );
    expect((await refusalOf(executor, { ...request, command: { jws } }))?.code).toBe(
      RefusalCode.REFUSAL_CODE_SIGNATURE_INVALID,
    );
  });

  it('refuses a command signed for another node, another verb or another permission', async () => {
    const otherNode = executor.nodeJob(
      node,
      'drain',
      {},
      {
        target: { kind: 'node', namespace: '', name: outsider, container: '', resource: '' },
      },
    );
    expect((await refusalOf(executor, otherNode))?.code).toBe(
      RefusalCode.REFUSAL_CODE_SIGNATURE_MISMATCH,
    );
    const otherVerb = executor.nodeJob(node, 'drain', {}, { verb: 'cordon' });
    expect((await refusalOf(executor, otherVerb))?.code).toBe(
      RefusalCode.REFUSAL_CODE_SIGNATURE_MISMATCH,
    );
    const consolePermission = executor.nodeJob(
      node,
      'cordon',
      {},
      {
        permission: 'cluster:node_console',
      },
    );
    expect((await refusalOf(executor, consolePermission))?.code).toBe(
      RefusalCode.REFUSAL_CODE_SIGNATURE_MISMATCH,
    );
  });

  it('refuses a replayed command (the first use cordons, the replay changes nothing)', async () => {
    const request = executor.nodeJob(node, 'cordon');
    const first = await executor.runJob(request);
    expect(first.result.outcome).toBe(NodeJobOutcome.NODE_JOB_OUTCOME_SUCCEEDED);
    expect((await nodeState(node)).unschedulable).toBe(true);
    await core.patchNode({ name: node, body: [{ op: 'remove', path: '/spec/unschedulable' }] });
    // The node lifecycle controller takes its unschedulable taint off after the uncordon: a write
    // of its own that the comparison below would see (it failed a CI run once, rv 2690 to 2691).
    await quietNode(node);
    expect((await refusalOf(executor, request))?.code).toBe(
      RefusalCode.REFUSAL_CODE_SIGNATURE_REPLAYED,
    );
  });

  it('refuses when mutate.node.enabled is off (after the signature, so a probe learns nothing)', async () => {
    expect((await refusalOf(gateOff, gateOff.nodeJob(node, 'cordon')))?.code).toBe(
      RefusalCode.REFUSAL_CODE_GATE_DISABLED,
    );
    const unsigned = { ...gateOff.nodeJob(node, 'cordon'), command: { jws: '' } };
    expect((await refusalOf(gateOff, unsigned))?.code).toBe(
      RefusalCode.REFUSAL_CODE_SIGNATURE_INVALID,
    );
  });

  it('refuses a verb outside mutate.node.verbs and a node outside mutate.node.nodes', async () => {
    expect((await refusalOf(executor, executor.nodeJob(node, 'uncordon')))?.code).toBe(
      RefusalCode.REFUSAL_CODE_POLICY_DENIED,
    );
    expect((await refusalOf(executor, executor.nodeJob(outsider, 'cordon')))?.code).toBe(
      RefusalCode.REFUSAL_CODE_POLICY_DENIED,
    );
    // An empty nodes list matches no node at all.
    expect((await refusalOf(noNodes, noNodes.nodeJob(node, 'cordon')))?.code).toBe(
      RefusalCode.REFUSAL_CODE_POLICY_DENIED,
    );
  });

  it("refuses when the executor's ServiceAccount lacks the rbac.nodeOps grants", async () => {
    const refusal = await refusalOf(noRbac, noRbac.nodeJob(node, 'drain'));
    expect(refusal?.code).toBe(RefusalCode.REFUSAL_CODE_RBAC_DENIED);
    expect(refusal?.reason).toContain('/pods/eviction:create');
  });

  it('refuses a node that does not exist and a malformed request', async () => {
    const ghost = `${prefix}-ghost`;
    expect((await refusalOf(executor, executor.nodeJob(ghost, 'cordon')))?.code).toBe(
      RefusalCode.REFUSAL_CODE_TARGET_NOT_FOUND,
    );
    const reboot = executor.nodeJob(node, 'reboot');
    expect((await refusalOf(executor, reboot))?.code).toBe(
      RefusalCode.REFUSAL_CODE_INVALID_REQUEST,
    );
    const noId = { ...executor.nodeJob(node, 'cordon'), requestId: '' };
    expect((await refusalOf(executor, noId))?.code).toBe(RefusalCode.REFUSAL_CODE_INVALID_REQUEST);
  });

  it('writes one audit line per refusal, with the code and no signed command in it', async () => {
    const id = requestId('audited');
    await executor.runJob({ ...executor.nodeJob(node, 'uncordon', { requestId: id }) });
    const line = await eventually(
      'the audit line',
      () =>
        Promise.resolve(
          executor.logLines().find((l) => l['audit'] === true && l['requestId'] === id),
        ),
      { timeoutMs: 5_000 },
    );
    expect(line).toMatchObject({
      principal: 'ops@example.com',
      verb: 'uncordon',
      outcome: 'refused',
      code: 'REFUSAL_CODE_POLICY_DENIED',
    });
    expect(JSON.stringify(executor.logLines())).not.toMatch(/eyJ[A-Za-z0-9_-]{20,}\./);
  });
});
