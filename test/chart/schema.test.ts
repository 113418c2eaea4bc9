// helm lint --strict and the installs values.schema.json must refuse, on helm 3.17 and helm 4.1.
// helm 3.17 validates with gojsonschema ("rbac: Additional property x is not allowed"); helm 3.18+
// and 4 with santhosh-tekuri/jsonschema ("at '/rbac': additional properties 'x' not allowed").
// Each refusal must name the key, whichever words the validator uses.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { buildClusterBinaries } from '../cluster/cluster.js';
import { CHART_DIR, HELM_VERSIONS, renderError, render, runHelm } from './helm.js';

interface Refusal {
  readonly name: string;
  readonly args: readonly string[];
  /** JSON pointer of the offending position (the parent object for an unknown key). */
  readonly at: readonly string[];
  /** The unknown key, when the refusal is about a key the schema does not know. */
  readonly unknownKey?: string;
}

const REFUSALS: readonly Refusal[] = [
  { name: 'an unknown root key', args: ['--set', 'rbca.exec=true'], at: [], unknownKey: 'rbca' },
  {
    name: 'an unknown rbac key',
    args: ['--set', 'rbac.nodeshell=true'],
    at: ['rbac'],
    unknownKey: 'nodeshell',
  },
  {
    name: 'an unknown key in a chart-only block',
    args: ['--set', 'persistence.sizeGi=2'],
    at: ['persistence'],
    unknownKey: 'sizeGi',
  },
  {
    name: 'a string for an rbac gate',
    args: ['--set-string', 'rbac.exec=true'],
    at: ['rbac', 'exec'],
  },
  {
    name: 'a string for a port',
    args: ['--set', 'service.metricsPort=metrics'],
    at: ['service', 'metricsPort'],
  },
  {
    name: 'a write verb in rbac.extraRules',
    args: [
      '--set-json',
      'rbac.extraRules=[{"apiGroups":[""],"resources":["pods"],"verbs":["create"]}]',
    ],
    at: ['rbac', 'extraRules', '0', 'verbs', '0'],
  },
  {
    name: 'a bare number at a duration position',
    args: ['--set', 'gateway.dialTimeout=30'],
    at: ['gateway', 'dialTimeout'],
  },
  {
    name: 'a snake_case key beside the rule lists',
    args: ['--set', 'collect.logs.tail_lines=50'],
    at: ['collect', 'logs'],
    unknownKey: 'tail_lines',
  },
  {
    name: 'a camelCase key inside a rules entry',
    args: ['--set', 'collect.logs.rules[0].podNames=be-*'],
    at: ['collect', 'logs', 'rules', '0'],
    unknownKey: 'podNames',
  },
  {
    name: 'a quantity where the agent wants a byte count',
    args: ['--set', 'buffer.maxDiskBytes=512Mi'],
    at: ['buffer', 'maxDiskBytes'],
  },
];

/** The path as each validator prints it: "/a/0/b" (helm 4, 3.18+) or "a.0.b" / "(root)" (3.17). */
function pathForms(at: readonly string[]): string[] {
  return at.length === 0 ? ["at ''", '(root)'] : [`'/${at.join('/')}'`, `- ${at.join('.')}:`];
}

describe.each(HELM_VERSIONS)('chart schema and lint ($label)', ({ binary }) => {
  let helm = '';
  beforeAll(async () => {
    helm = join(await buildClusterBinaries(process.env), binary);
  });

  it('passes helm lint --strict with defaults and with every gate on', async () => {
    await runHelm(helm, ['lint', '--strict', CHART_DIR, '--set', 'secret.tenantToken=t']);
    await runHelm(helm, [
      'lint',
      '--strict',
      CHART_DIR,
      '--set',
      'secret.tenantToken=t',
      '--set',
      'rbac.exec=true,rbac.nodeShell=true,rbac.nodeOps=true,rbac.write=true,rbac.readAll=true',
      '--set',
      'serviceMonitor.enabled=true,persistence.enabled=false',
    ]);
  });

  it.each(REFUSALS)('refuses $name, naming the key', async ({ args, at, unknownKey }) => {
    const stderr = await renderError(helm, { args });
    expect(stderr).toContain("values don't meet the specifications of the schema");
    const forms = pathForms(at);
    expect(
      forms.some((form) => stderr.includes(form)),
      `${forms.join(' or ')} in:\n${stderr}`,
    ).toBe(true);
    if (unknownKey !== undefined) expect(stderr).toContain(unknownKey);
  });

  it('accepts 0 at a duration position and writes it as a string', async () => {
    const objects = await render(helm, { args: ['--set', 'collect.state.resyncPeriod=0'] });
    const configMap = objects.find((o) => o.kind === 'ConfigMap');
    const data = configMap?.['data'] as Record<string, string>;
    expect(data['config.yaml']).toContain('resync_period: "0"');
  });

  it('accepts blank rule fields, as the agent does', async () => {
    await render(helm, {
      args: ['--set', 'collect.logs.rules[0].namespace=', '--set', 'collect.logs.rules[0].id=x'],
    });
  });
});

describe('values.schema.chart-only.json', () => {
  const read = async (name: string) => readFile(join(CHART_DIR, name), 'utf8');

  it('describes exactly the chart-only keys of values.yaml, closed everywhere', async () => {
    const chartOnly = JSON.parse(await read('values.schema.chart-only.json')) as Record<
      string,
      unknown
    >;
    const values = parse(await read('values.yaml')) as Record<string, unknown>;
    const configSections = [
      'agent',
      'gateway',
      'collect',
      'query',
      'mutate',
      'exec',
      'buffer',
      'observability',
      'log',
    ];
    expect(Object.keys(chartOnly).sort()).toEqual(
      Object.keys(values)
        .filter((key) => !configSections.includes(key))
        .sort(),
    );
    const open: string[] = [];
    const walk = (schema: unknown, path: string) => {
      if (typeof schema !== 'object' || schema === null) return;
      const node = schema as Record<string, unknown>;
      if ('properties' in node && node['additionalProperties'] !== false) open.push(path);
      for (const [key, child] of Object.entries(node)) walk(child, `${path}.${key}`);
    };
    walk(chartOnly, '');
    expect(open).toEqual([]);
    expect((chartOnly['rbac'] as Record<string, unknown>)['additionalProperties']).toBe(false);
  });

  it('is what values.schema.json says about the chart-only keys', async () => {
    const chartOnly = JSON.parse(await read('values.schema.chart-only.json')) as Record<
      string,
      unknown
    >;
    const schema = JSON.parse(await read('values.schema.json')) as {
      additionalProperties: unknown;
      properties: Record<string, unknown>;
    };
    expect(schema.additionalProperties).toBe(false);
    for (const [key, part] of Object.entries(chartOnly)) {
      expect(schema.properties[key], key).toEqual(part);
    }
  });
});
