// The chart's security refusals, on helm 3.17 and helm 4.1: every adversarial value is refused
// with a message naming its key, and the legitimate neighbour of each still renders.
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { buildClusterBinaries } from '../cluster/cluster.js';
import { ADVERSARIAL_CASES } from './adversarial-values.js';
import { findOne, grants, HELM_VERSIONS, render, renderError, rulesOf } from './helm.js';
import { RENDER_UNIMPLEMENTED } from './rbac-expectations.js';

describe.each(HELM_VERSIONS)('chart refusals ($label)', ({ binary }) => {
  let helm = '';
  beforeAll(async () => {
    helm = join(await buildClusterBinaries(process.env), binary);
  });

  it.each(ADVERSARIAL_CASES)('refuses $name', async ({ values, message }) => {
    const stderr = await renderError(helm, { values });
    expect(stderr).toContain(message);
  });

  it('refuses a collector memory limit below the measured minimum, naming it, and renders 160Mi', async () => {
    for (const memory of ['100Mi', '0.1Gi', '144Mi', '159Mi', 167_000_000]) {
      const stderr = await renderError(helm, { values: { resources: { limits: { memory } } } });
      expect(stderr, String(memory)).toContain(
        `resources.limits.memory ${String(memory)} is below the collector's minimum of 160Mi (it measured up to 95 MiB resident when idle`,
      );
    }
    for (const memory of ['160Mi', '167772160', '1Gi']) {
      const objects = await render(helm, { values: { resources: { limits: { memory } } } });
      expect(
        objects.some((o) => o.kind === 'Deployment'),
        memory,
      ).toBe(true);
    }
  });

  it('asks 192Mi when a console gate is on: the collector then runs its console relay thread too', async () => {
    for (const rbac of [{ exec: true }, { nodeShell: true }]) {
      const stderr = await renderError(helm, {
        values: { rbac, ...RENDER_UNIMPLEMENTED, resources: { limits: { memory: '191Mi' } } },
      });
      expect(stderr, JSON.stringify(rbac)).toContain(
        "resources.limits.memory 191Mi is below the collector's minimum of 192Mi (it measured up to about 125 MiB resident when idle with its console relay thread",
      );
      const objects = await render(helm, {
        values: { rbac, ...RENDER_UNIMPLEMENTED, resources: { limits: { memory: '192Mi' } } },
      });
      expect(
        objects.some((o) => o.kind === 'Deployment'),
        JSON.stringify(rbac),
      ).toBe(true);
    }
  });

  it('renders the legitimate neighbours of the refused values', async () => {
    // pods/log is the one allowed subresource; a named CRD resource is fine.
    const objects = await render(helm, {
      values: {
        rbac: {
          extraRules: [
            { apiGroups: [''], resources: ['pods/log'], verbs: ['get'] },
            { apiGroups: ['example.com'], resources: ['widgets'], verbs: ['get', 'list'] },
          ],
        },
        serviceAccount: { name: 'my-collector' },
        extraVolumes: [{ name: 'ca', configMap: { name: 'my-ca' } }],
        extraVolumeMounts: [{ name: 'ca', mountPath: '/etc/kubexa-ca' }],
        extraEnv: [{ name: 'HTTPS_PROXY', value: 'http://proxy:3128' }],
        secret: { existingSecret: 'my-tenant-token' },
        gateway: { tls: false, allowInsecure: true },
      },
    });
    const role = findOne(objects, 'ClusterRole', 'kubexa:kubexa-agent');
    expect(grants(rulesOf(role))).toContain('example.com/widgets:list');
    const config = findOne(objects, 'ConfigMap')['data'] as Record<string, string>;
    expect(config['config.yaml']).toContain('allow_insecure: true');
  });

  it('refuses an executor gate on a cluster older than 1.30 (no ValidatingAdmissionPolicy v1 to narrow its Secret creation), renders it on 1.30', async () => {
    const values = { rbac: { nodeOps: true } };
    const stderr = await renderError(helm, { values, args: ['--kube-version', '1.29.9'] });
    expect(stderr).toContain('the executor (an rbac.* gate is on) needs Kubernetes 1.30 or later');
    const objects = await render(helm, { values, args: ['--kube-version', '1.30.0'] });
    expect(objects.map((o) => o.kind)).toContain('ValidatingAdmissionPolicy');
    // With every gate off nothing needs it: an older cluster is fine.
    await render(helm, { values: {}, args: ['--kube-version', '1.29.9'] });
  });

  it('renders the executor with a gate on only under the explicit acknowledgement, and then grants the gate nothing', async () => {
    // Every feature is implemented now: a chart copy that lists none of them stands for the
    // next gate that lands before its feature, so the mechanism stays proven.
    const values = { rbac: { exec: true, nodeShell: true } };
    expect(await renderError(helm, { values, implementedFeatures: [] })).toContain(
      'rbac.exec=true is refused: this version of the executor does not implement',
    );
    const objects = await render(helm, {
      values: { ...values, ...RENDER_UNIMPLEMENTED },
      implementedFeatures: [],
    });
    const executorRoles = objects.filter(
      (o) => o.kind.endsWith('Role') && o.metadata.name.includes('executor'),
    );
    expect(executorRoles.map((o) => `${o.kind}/${o.metadata.name}`)).toEqual([
      'Role/kubexa-agent-executor-token-minter',
    ]);
  });
});
