// The real node's start wait (test/cluster/node.ts): a kubelet that stays alive but never makes
// its node Ready fails the start with what the node last reported, not a bare timeout. Run here
// against the API server with a Node object no kubelet (and no kwok) looks after.
import { CoreV1Api } from '@kubernetes/client-node';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { waitForNodeReady } from '../cluster/node.js';
import { loadKubeConfig, uniqueName } from '../helpers/kube.js';

const core = loadKubeConfig(inject('kubeconfigPath')).makeApiClient(CoreV1Api);
const name = uniqueName('never-ready');
const stillRunning = () => undefined;

afterAll(() => core.deleteNode({ name }).catch(() => undefined));

describe('waiting for the real node to be Ready', () => {
  it('times out naming a node that never registered', async () => {
    await expect(waitForNodeReady(core, name, 1_000, stillRunning)).rejects.toThrow(
      `waiting for node ${name} to be Ready: node ${name} never registered (no Node object)`,
    );
  });

  it("times out with the node's conditions when it registered but never became Ready", async () => {
    const notReady = 'container runtime network not ready: NetworkReady=false';
    // Not annotated for kwok (manage-all-nodes=false): nothing changes these conditions.
    await core.createNode({
      body: {
        metadata: { name },
        status: {
          conditions: [
            { type: 'MemoryPressure', status: 'False', reason: 'KubeletHasSufficientMemory' },
            { type: 'Ready', status: 'False', reason: 'KubeletNotReady', message: notReady },
          ],
        },
      },
    });
    await expect(waitForNodeReady(core, name, 1_000, stillRunning)).rejects.toThrow(
      `node ${name} is not Ready; its conditions:\n` +
        '  MemoryPressure=False KubeletHasSufficientMemory:\n' +
        `  Ready=False KubeletNotReady: ${notReady}`,
    );
  });
});
