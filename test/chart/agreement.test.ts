// The chart refuses exactly what the agent refuses at start (issue 9, item 7). Every field of the
// agent's config schema is walked, values just inside, just outside and of the wrong type are
// generated for it, and each set of values goes through helm 3.17, helm 4.1 and `config check`:
//   - helm accepts: the ConfigMap it rendered must pass `config check`;
//   - helm refuses: the config those values would have rendered must fail `config check`.
// Rules that relate two values are not in values.schema.json but in templates/validate.yaml;
// they get explicit cases below.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { z } from 'zod';
import { HOST_PATTERN } from '../../shared/config/address.js';
import { runConfigCheck } from '../../shared/config/config-check.js';
import { ConfigSchema } from '../../shared/config/schema.js';
import { describeSchema, formatPath, type AnySchema } from '../../shared/config/schema-walk.js';
import { toCamelCase, valuesToConfig } from '../../shared/config/to-values-schema.js';
import { buildClusterBinaries } from '../cluster/cluster.js';
import {
  BASE_VALUES,
  CHART_DIR,
  deepMerge,
  HELM_VERSIONS,
  HelmError,
  renderText,
  type Values,
} from './helm.js';

interface Case {
  /** The config key and the value, for the report. */
  readonly name: string;
  readonly values: Values;
}

/** A valid entry for each rule list, so a case changes one field of an otherwise valid rule. */
const BASE_ENTRIES: Readonly<Record<string, Values>> = {
  'collect.logs.rules': {},
  'collect.state.rules': { resources: ['pods'] },
  'collect.metrics.rules': { resources: ['pods'] },
  'collect.metrics.custom_endpoints': { url: 'http://exporter.team-a:9100/metrics' },
  'query.rules': { resources: ['pods'] },
  'mutate.rules': { namespace: 'team-a', resources: ['deployments'], verbs: ['scale'] },
  'exec.pod.rules': { namespace: 'team-a' },
};

/** The node-shell helper image must be pinned by digest. */
const PINNED_IMAGE = `busybox@sha256:${'a'.repeat(64)}`;

const WRONG_TYPES: readonly unknown[] = [['x'], { x: 'y' }];

const NAME_SAMPLES: readonly unknown[] = [
  '',
  'web-1',
  'web.v1',
  'web-*',
  '*',
  'a*b',
  'web-{a,b}',
  'prød-ünïcode',
  'Web',
  ' web ',
  ' ',
  'a'.repeat(64),
  5,
  -5,
];
const ADDRESS_SAMPLES: readonly unknown[] = [
  '',
  ':9091',
  '127.0.0.1:9091',
  '[::1]:9091',
  'gw.example.com:443',
  '9091',
  ':0',
  ':65535',
  ':65536',
  'gw.example.com',
  'https://gw.example.com:443',
  'gw example:443',
  9091,
];
const RESOURCE_SAMPLES: readonly unknown[] = [
  'pods',
  'PODS',
  ' deployments ',
  'v1/pods',
  'apps/v1/deployments',
  'a/b/c/d',
  'nodes',
  '*',
  'apps/v1/*',
  'po ds',
  '',
  5,
];
const FREE_TEXT_SAMPLES: readonly unknown[] = ['x', '', 5, true];

/** Values for a key whose JSON form is a string with a pattern, chosen by what it formats. */
function stringSamples(schema: AnySchema): readonly unknown[] {
  const json = JSON.stringify(schemaJson(schema));
  if (!json.includes('"pattern"')) return FREE_TEXT_SAMPLES;
  return json.includes(':') ? ADDRESS_SAMPLES : NAME_SAMPLES;
}

function schemaJson(schema: AnySchema): Record<string, unknown> {
  const node = describeSchema(schema);
  if (node.kind !== 'string' && node.kind !== 'leaf') return {};
  return z.toJSONSchema(node.schema, { target: 'draft-07', io: 'input', unrepresentable: 'any' });
}

function durationSamples(max: string, positive: boolean): unknown[] {
  const hours = Number(max.slice(0, -1));
  return [
    max,
    `${hours * 60}m`,
    `${hours}h0m0s`,
    '1s',
    '0.5s',
    positive ? '1ns' : '0',
    `${hours}h0m0.000000001s`,
    `${hours * 60 + 1}m`,
    `${hours * 2}h`,
    '1m90s',
    positive ? '0s' : '-1s',
    '30',
    30,
    0,
    ...WRONG_TYPES,
  ];
}

function integerSamples(json: Record<string, unknown>): unknown[] {
  const samples: unknown[] = [1.5, '5', ...WRONG_TYPES];
  const min = json['minimum'];
  const max = json['maximum'];
  if (typeof min === 'number') samples.push(min, min - 1);
  if (typeof max === 'number') samples.push(max, max + 1);
  if (typeof min !== 'number' || min > Number.MIN_SAFE_INTEGER) samples.push(-1);
  samples.push(1e20);
  return samples;
}

function leafSamples(schema: AnySchema): readonly unknown[] {
  const json = schemaJson(schema);
  if (json['type'] === 'boolean') return [true, false, 'true', 1];
  if (Array.isArray(json['enum'])) return [...(json['enum'] as unknown[]), 'nope', 5];
  if (json['type'] === 'integer' || json['type'] === 'number') return integerSamples(json);
  return FREE_TEXT_SAMPLES;
}

/** Every case for every field below `schema`; `wrap` puts a field's value into whole values. */
function casesFor(
  schema: AnySchema,
  configPath: readonly (string | number)[],
  inRuleList: boolean,
  wrap: (value: unknown) => Values,
): Case[] {
  const node = describeSchema(schema);
  const key = formatPath(configPath);
  const each = (samples: readonly unknown[]) =>
    samples.map((sample) => ({ name: `${key} = ${JSON.stringify(sample)}`, values: wrap(sample) }));
  switch (node.kind) {
    case 'object': {
      const cases: Case[] = configPath.length > 0 ? each(['x', 5]) : [];
      for (const [field, child] of Object.entries(node.shape)) {
        const described = describeSchema(child);
        if (described.kind === 'string' && described.mark === 'secret') continue;
        const valueKey = inRuleList ? field : toCamelCase(field);
        cases.push(
          ...casesFor(child, [...configPath, field], inRuleList, (value) =>
            wrap({ [valueKey]: value }),
          ),
        );
      }
      return cases;
    }
    case 'array': {
      const element = describeSchema(node.element);
      if (element.kind === 'object') {
        const base = BASE_ENTRIES[key] ?? {};
        // [{}] leaves out the keys an entry must have; [null] is a blank entry, skipped.
        const cases: Case[] = each(['x', [5], [{}], [null]]);
        for (const [field, child] of Object.entries(element.shape)) {
          cases.push(
            ...casesFor(child, [...configPath, 0, field], true, (value) =>
              wrap([{ ...base, [field]: value }]),
            ),
          );
        }
        return cases;
      }
      const samples = key.endsWith('resources')
        ? RESOURCE_SAMPLES
        : element.kind === 'string'
          ? stringSamples(node.element)
          : leafSamples(node.element);
      return [...each(samples.map((sample) => [sample])), ...each(['x', [['x']], [{ x: 1 }]])];
    }
    case 'record':
      return each([{ team: 'a' }, { team: 5 }, { team: '' }, 'x', ['x']]);
    case 'duration':
      return each(durationSamples(node.spec.max, node.spec.positive));
    case 'string':
      return each([...stringSamples(schema), ...WRONG_TYPES]);
    case 'leaf':
      return each(leafSamples(schema));
  }
}

function fieldCases(): Case[] {
  return casesFor(ConfigSchema, [], false, (value) => value as Values);
}

/** Cross-field rules (templates/validate.yaml), each with a value that passes and one that does not. */
const CROSS_FIELD_CASES: readonly Case[] = [
  { name: 'health port = metrics port', values: { observability: { healthAddr: ':9090' } } },
  {
    name: 'health port = metrics port, other hosts',
    values: { observability: { healthAddr: '127.0.0.1:9090', metricsAddr: '0.0.0.0:9090' } },
  },
  { name: 'health and metrics ports differ', values: { observability: { healthAddr: ':9091' } } },
  { name: 'pprof on the health port', values: { observability: { pprofAddr: ':8080' } } },
  { name: 'pprof on its own port', values: { observability: { pprofAddr: '127.0.0.1:6060' } } },
  {
    name: 'reconnect max delay below the initial delay',
    values: { gateway: { reconnectInitialDelay: '2s', reconnectMaxDelay: '1999ms' } },
  },
  {
    name: 'reconnect max delay equal to the initial delay, written differently',
    values: { gateway: { reconnectInitialDelay: '60s', reconnectMaxDelay: '1m' } },
  },
  {
    name: 'every collector off',
    values: {
      collect: {
        logs: { enabled: false },
        state: { enabled: false },
        metrics: { enabled: false },
        events: { enabled: false },
      },
    },
  },
  { name: 'checkpoint dir with ..', values: { collect: { logs: { checkpointDir: '/a/../b' } } } },
  {
    name: 'checkpoint dir with .. while logs are off',
    values: { collect: { logs: { enabled: false, checkpointDir: '/a/../b' } } },
  },
  { name: 'node jobs on without verbs', values: { mutate: { node: { enabled: true } } } },
  {
    name: 'node jobs on with a verb',
    values: { mutate: { node: { enabled: true, verbs: ['cordon'] } } },
  },
  { name: 'node consoles on without an image', values: { exec: { node: { enabled: true } } } },
  {
    name: 'node consoles with a session shorter than the helper wait',
    values: { exec: { node: { enabled: true, image: PINNED_IMAGE, maxSessionSec: 60 } } },
  },
  {
    name: 'node consoles on, image pinned by digest',
    values: { exec: { node: { enabled: true, image: PINNED_IMAGE } } },
  },
  {
    name: 'node consoles on, image by tag',
    values: { exec: { node: { enabled: true, image: 'busybox:1.36' } } },
  },
  {
    name: 'node consoles off, image by tag',
    values: { exec: { node: { enabled: false, image: 'busybox' } } },
  },
  {
    name: 'node consoles on, image with a short digest',
    values: { exec: { node: { enabled: true, image: 'busybox@sha256:abc' } } },
  },
  {
    name: 'gateway from host and port',
    values: { gateway: { address: '', host: 'gw.example.com' } },
  },
  { name: 'gateway host with a scheme', values: { gateway: { address: '', host: 'https://gw' } } },
  { name: 'gateway host with a port', values: { gateway: { address: '', host: 'gw:443' } } },
];

type Verdict = 'accepts' | 'refuses';

/**
 * Where the chart is deliberately stricter than the agent: port 0 (any free port) suits tests and
 * the demo, but the chart's probes, container ports and Service need the port number. And an
 * install refuses plaintext or unverified TLS to the gateway unless `gateway.allowInsecure`
 * acknowledges it (docs/security.md), while the agent run by hand against a development gateway
 * warns loudly instead (and refuses under `security.profile: strict`).
 */
function chartIsStricter(name: string): boolean {
  return (
    /^observability\.(metrics|health)_addr = ":0"$/.test(name) ||
    /^gateway\.(tls = false|insecure_skip_verify = true)$/.test(name)
  );
}

const CHECK_ENV = { KUBEXA_TENANT_TOKEN: 'test-token' };

function check(configText: string): { verdict: Verdict; report: string } {
  let report = '';
  const status = runConfigCheck({
    fileText: configText,
    env: CHECK_ENV,
    write: (text) => {
      report += text;
    },
  });
  return { verdict: status === 0 ? 'accepts' : 'refuses', report };
}

/** What the chart would write into config.yaml for `values`, had it rendered them. */
function configForValues(defaults: Values, values: Values): string {
  const merged = deepMerge(deepMerge(defaults, BASE_VALUES), values);
  const config = valuesToConfig(merged);
  const gateway = merged['gateway'];
  // The chart's kubexa.gatewayAddress: an empty address is host:port.
  if (typeof gateway === 'object' && gateway !== null && !Array.isArray(gateway)) {
    const { address, host, port } = gateway as Values;
    if (address === '' || address === undefined) {
      const derived = `${String(host)}:${Number(port ?? 443)}`;
      return stringify({
        ...config,
        gateway: { ...(config['gateway'] as Values), address: derived },
      });
    }
  }
  return stringify(config);
}

async function helmVerdict(
  helm: string,
  values: Values,
): Promise<{ verdict: Verdict; configText?: string; stderr?: string }> {
  try {
    const text = await renderText(helm, {
      values,
      args: ['--show-only', 'templates/configmap.yaml'],
    });
    const configMap = parse(text) as { data: Record<string, string> };
    return { verdict: 'accepts', configText: configMap.data['config.yaml'] ?? '' };
  } catch (err: unknown) {
    if (err instanceof HelmError) return { verdict: 'refuses', stderr: err.stderr };
    throw err;
  }
}

/** Runs `task` over `items`, `limit` at a time, in order of the results. */
async function mapLimited<T, R>(
  items: readonly T[],
  limit: number,
  task: (item: T) => Promise<R>,
): Promise<R[]> {
  const results: R[] = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const index = next;
      next += 1;
      results[index] = await task(items[index]!);
    }
  };
  await Promise.all(Array.from({ length: limit }, worker));
  return results;
}

describe('helm and config check agree on every field of the config schema', () => {
  let binDir = '';
  let defaults: Values = {};
  beforeAll(async () => {
    binDir = await buildClusterBinaries(process.env);
    defaults = parse(await readFile(join(CHART_DIR, 'values.yaml'), 'utf8')) as Values;
  });

  const cases = [...fieldCases(), ...CROSS_FIELD_CASES];

  it('generates cases for every field, just inside, just outside and of the wrong type', () => {
    expect(cases.length).toBeGreaterThan(500);
    for (const key of [
      'buffer.flush_interval',
      'gateway.dial_timeout',
      'gateway.address',
      'observability.metrics_addr',
      'buffer.max_disk_bytes',
      'collect.logs.rules[0].pod_names',
      'exec.pod.rules[0].containers',
    ]) {
      expect(
        cases.some((item) => item.name.startsWith(`${key} = `)),
        key,
      ).toBe(true);
    }
  });

  it('gives the same verdict from helm 3.17, helm 4.1 and config check', async () => {
    const disagreements = await mapLimited(cases, 4, async ({ name, values }) => {
      if (chartIsStricter(name)) {
        for (const { label, binary } of HELM_VERSIONS) {
          const result = await helmVerdict(join(binDir, binary), values);
          const checked = check(configForValues(defaults, values));
          if (result.verdict !== 'refuses' || checked.verdict !== 'accepts') {
            return `${name}: ${label} ${result.verdict}, config check ${checked.verdict}; expected the chart alone to refuse`;
          }
        }
        return undefined;
      }
      const verdicts: string[] = [];
      const seen = new Set<Verdict>();
      for (const { label, binary } of HELM_VERSIONS) {
        const result = await helmVerdict(join(binDir, binary), values);
        seen.add(result.verdict);
        verdicts.push(`${label} ${result.verdict}`);
        const configText = result.configText ?? configForValues(defaults, values);
        const checked = check(configText);
        seen.add(checked.verdict);
        verdicts.push(`config check ${checked.verdict} (after ${label})`);
        if (seen.size > 1) {
          const why =
            result.stderr ?? checked.report.split('\n').find((line) => line.startsWith('error:'));
          return `${name}: ${verdicts.join(', ')}: ${(why ?? '').slice(0, 300)}`;
        }
      }
      return undefined;
    });
    expect(disagreements.filter((line) => line !== undefined)).toEqual([]);
  }, 900_000);

  it('checks gateway.host with the pattern the agent checks the address host with', async () => {
    const chartOnly = JSON.parse(
      await readFile(join(CHART_DIR, 'values.schema.chart-only.json'), 'utf8'),
    ) as { gateway: { properties: { host: { pattern: string } } } };
    expect(chartOnly.gateway.properties.host.pattern).toBe(`^${HOST_PATTERN}$`);
  });
});
