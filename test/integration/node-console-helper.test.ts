// The node console's helper Pod spec against the real API server: it validates and is admitted
// as built (a server-side dry run in a namespace labelled for privileged pods), and what comes
// back keeps every security-relevant field. The console itself (exec, boot sweep) is not here yet.
import { CoreV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { helperPod } from '../../executor/node-console/helper-pod.js';
import { createTestNamespace, loadKubeConfig, type TestNamespace } from '../helpers/kube.js';

const kc = loadKubeConfig(inject('kubeconfigPath'));
const core = kc.makeApiClient(CoreV1Api);
let testNamespace: TestNamespace;
let namespace: string;

beforeAll(async () => {
  testNamespace = await createTestNamespace(kc, 'node-console', {
    'pod-security.kubernetes.io/enforce': 'privileged',
  });
  namespace = testNamespace.name;
});

afterAll(async () => {
  await testNamespace.delete();
});

describe('node console helper Pod', () => {
  it('is accepted by the API server as built, privileged, pinned, with no token and a deadline', async () => {
    const body = helperPod({
      node: 'kwok-node-0',
      namespace,
      image: 'registry.invalid/tools:1',
      sessionId: 'session-1',
      release: 'kubexa-agent',
      maxSessionSec: 300,
    });
    const created = await core.createNamespacedPod({ namespace, body, dryRun: 'All' });
    expect(created.metadata?.name).toMatch(/^node-shell-kwok-node-0-/);
    expect(created.spec).toMatchObject({
      nodeName: 'kwok-node-0',
      hostPID: true,
      hostNetwork: true,
      hostIPC: true,
      automountServiceAccountToken: false,
      activeDeadlineSeconds: 330,
      tolerations: [{ operator: 'Exists' }],
    });
    expect(created.spec?.containers[0]?.securityContext?.privileged).toBe(true);
    // No token volume was injected.
    expect(created.spec?.volumes ?? []).toEqual([]);
    expect((await core.listNamespacedPod({ namespace })).items).toEqual([]);
  });
});
