// helm lint --strict and the installs values.schema.json must refuse, on helm 3.17 and helm 4.1.
// helm 3.17 validates with gojsonschema ("rbac: Additional property x is not allowed"); helm 3.18+
// and 4 with santhosh-tekuri/jsonschema ("at '/rbac': additional properties 'x' not allowed").
// Each refusal must name the key, whichever words the validator uses.
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
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
      'rbac.exec=true,rbac.nodeShell=true,rbac.nodeOps=true,rbac.write=true',
      '--set',
      'executor.renderUnimplemented=true',
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

const CONFIG_SECTIONS = [
  'agent',
  'gateway',
  'collect',
  'query',
  'mutate',
  'exec',
  'buffer',
  'observability',
  'log',
  'security',
];

type Schema = Record<string, unknown>;

const readChartFile = async (name: string) => readFile(join(CHART_DIR, name), 'utf8');
const readJson = async (name: string) => JSON.parse(await readChartFile(name)) as Schema;
const propertiesOf = (schema: unknown): Record<string, Schema> =>
  ((schema as Schema | undefined)?.['properties'] ?? {}) as Record<string, Schema>;

describe('values.schema.chart-only.json', () => {
  it('describes exactly the chart-only keys of values.yaml, closed everywhere', async () => {
    const chartOnly = await readJson('values.schema.chart-only.json');
    const values = parse(await readChartFile('values.yaml')) as Schema;
    const topLevel = Object.keys(chartOnly).filter((key) => !CONFIG_SECTIONS.includes(key));
    expect(topLevel.sort()).toEqual(
      Object.keys(values)
        .filter((key) => !CONFIG_SECTIONS.includes(key))
        .sort(),
    );
    // Inside config sections the chart adds only gateway.host and gateway.port, as bare
    // "properties" for the generator to merge into the generated section.
    expect(Object.keys(chartOnly).filter((key) => CONFIG_SECTIONS.includes(key))).toEqual([
      'gateway',
    ]);
    expect(Object.keys(chartOnly['gateway'] as Schema)).toEqual(['properties']);
    expect(Object.keys(propertiesOf(chartOnly['gateway']))).toEqual(['host', 'port']);

    const open: string[] = [];
    const walk = (schema: unknown, path: string) => {
      if (typeof schema !== 'object' || schema === null) return;
      const node = schema as Schema;
      if ('properties' in node && node['additionalProperties'] !== false) open.push(path);
      for (const [key, child] of Object.entries(node)) walk(child, `${path}.${key}`);
    };
    for (const key of topLevel) walk(chartOnly[key], key);
    expect(open).toEqual([]);
    expect((chartOnly['rbac'] as Schema)['additionalProperties']).toBe(false);
  });

  it('is what values.schema.json says about the chart-only keys', async () => {
    const chartOnly = await readJson('values.schema.chart-only.json');
    const schema = await readJson('values.schema.json');
    expect(schema['additionalProperties']).toBe(false);
    const properties = propertiesOf(schema);
    for (const [key, part] of Object.entries(chartOnly)) {
      if (CONFIG_SECTIONS.includes(key)) {
        expect(propertiesOf(properties[key]), key).toMatchObject(propertiesOf(part));
      } else {
        expect(properties[key], key).toEqual(part);
      }
    }
  });
});

describe('config key mapping', () => {
  /** Every camelCase key outside rule lists and label maps, as dotted paths. */
  function blockKeys(schema: Schema, path: string, out: string[]): string[] {
    for (const [key, child] of Object.entries(propertiesOf(schema))) {
      const childPath = path === '' ? key : `${path}.${key}`;
      out.push(childPath);
      if (child['properties'] !== undefined) blockKeys(child, childPath, out);
    }
    return out;
  }

  it('writes 0 at every block-level duration of values.schema.json as the string "0"', async () => {
    const schema = await readJson('values.schema.json');
    // A block-level duration: a string with a pattern, or the integer 0 (maximum 0).
    const durations: string[][] = [];
    const walk = (node: Schema, path: string[]) => {
      for (const [key, child] of Object.entries(propertiesOf(node))) {
        const types = child['type'];
        if (Array.isArray(types) && types.includes('integer') && child['maximum'] === 0) {
          durations.push([...path, key]);
        }
        if (child['properties'] !== undefined) walk(child, [...path, key]);
      }
    };
    for (const section of CONFIG_SECTIONS) walk(propertiesOf(schema)[section] ?? {}, [section]);
    expect(durations.length).toBeGreaterThan(0);

    const values: Schema = {};
    for (const path of durations) {
      let node = values;
      for (const key of path.slice(0, -1)) node = (node[key] ??= {}) as Schema;
      node[path.at(-1)!] = 0;
    }
    const helm = join(await buildClusterBinaries(process.env), 'helm');
    const objects = await render(helm, { values });
    const data = objects.find((o) => o.kind === 'ConfigMap')?.['data'] as Record<string, string>;
    const config = parse(data['config.yaml'] ?? '') as Schema;
    const snake = (key: string) => key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
    const notQuoted = durations.filter((path) => {
      let node: unknown = config;
      for (const key of path) node = (node as Schema | undefined)?.[snake(key)];
      return node !== '0';
    });
    expect(notQuoted.map((path) => path.join('.'))).toEqual([]);
  });

  it("turns every config key of values.schema.json into the agent's snake_case key", async () => {
    const schema = await readJson('values.schema.json');
    const keys = CONFIG_SECTIONS.flatMap((section) =>
      blockKeys(propertiesOf(schema)[section] ?? {}, section, [section]),
    ).flatMap((path) => path.split('.').slice(-1));
    const unique = [...new Set(keys)].sort();
    // The chart's converter is sprig's snakecase; the agent's keys are camelCase undone.
    const dir = await mkdtemp(join(tmpdir(), 'kubexa-snake-'));
    try {
      await mkdir(join(dir, 'templates'));
      await writeFile(join(dir, 'Chart.yaml'), 'apiVersion: v2\nname: snake\nversion: 0.0.1\n');
      await writeFile(
        join(dir, 'templates', 'keys.yaml'),
        '# {{ range .Values.keys }}{{ . }}={{ snakecase . }} {{ end }}\n',
      );
      await writeFile(join(dir, 'values.yaml'), JSON.stringify({ keys: unique }));
      const helm = join(await buildClusterBinaries(process.env), 'helm');
      const out = await runHelm(helm, ['template', 'snake', dir]);
      const rendered = out
        .slice(out.lastIndexOf('# ') + 2)
        .trim()
        .split(' ');
      expect(rendered).toEqual(
        unique.map((key) => `${key}=${key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)}`),
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
