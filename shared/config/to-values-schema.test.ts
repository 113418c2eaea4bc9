// ajv (present through fastify) evaluates the generated draft-07 schema here, quickly; the chart
// tests run the real helm binaries over the same file.
import { Ajv } from 'ajv';
import { stringify } from 'yaml';
import { describe, expect, it } from 'vitest';
import { loadConfig } from './load-config.js';
import { BASE_ENV } from './load-for-test.js';
import {
  toCamelCase,
  valuesSchemaForConfig,
  valuesToConfig,
  type JsonSchema,
} from './to-values-schema.js';

const CHART_ONLY: Record<string, JsonSchema> = {
  image: {
    type: 'object',
    additionalProperties: false,
    properties: { repository: { type: 'string' }, tag: { type: 'string' } },
  },
  rbac: {
    type: 'object',
    additionalProperties: false,
    properties: { create: { type: 'boolean' }, exec: { type: 'boolean' } },
  },
  gateway: { properties: { host: { type: 'string' }, port: { type: 'integer' } } },
};

const schema = valuesSchemaForConfig(CHART_ONLY);
const validate = new Ajv({ strict: false, allErrors: true }).compile(schema);

/** The instance paths ajv refuses `values` at ('' when accepted). */
function refusals(values: unknown): string[] {
  if (validate(values)) return [];
  return (validate.errors ?? []).map((error) => `${error.instancePath} ${error.keyword}`);
}

function walk(
  node: unknown,
  visit: (node: Record<string, unknown>, path: string) => void,
  path = '',
) {
  if (typeof node !== 'object' || node === null) return;
  if (Array.isArray(node)) {
    node.forEach((item, index) => {
      walk(item, visit, `${path}[${index}]`);
    });
    return;
  }
  const record = node as Record<string, unknown>;
  visit(record, path);
  for (const [key, child] of Object.entries(record)) walk(child, visit, `${path}/${key}`);
}

describe('toCamelCase', () => {
  it('maps config keys to value keys', () => {
    expect(toCamelCase('tail_lines')).toBe('tailLines');
    expect(toCamelCase('max_memory_bytes')).toBe('maxMemoryBytes');
    expect(toCamelCase('resume_window_sec')).toBe('resumeWindowSec');
    expect(toCamelCase('enabled')).toBe('enabled');
  });
});

describe('valuesSchemaForConfig', () => {
  it('is a closed draft-07 schema: every object schema sets additionalProperties', () => {
    expect(schema['$schema']).toBe('http://json-schema.org/draft-07/schema#');
    const open: string[] = [];
    walk(schema, (node, path) => {
      const type = node['type'];
      const isObject = type === 'object' || (Array.isArray(type) && type.includes('object'));
      if (isObject && !('additionalProperties' in node)) open.push(path);
    });
    expect(open).toEqual([]);
    expect(schema['additionalProperties']).toBe(false);
  });

  it('uses camelCase keys outside rule lists and the seed-documented names', () => {
    const props = schema['properties'] as Record<string, JsonSchema>;
    const keys = (path: string[]): string[] => {
      let node: JsonSchema | undefined = { properties: props };
      for (const key of path) {
        const properties: Record<string, JsonSchema> = (node?.['properties'] ?? {}) as Record<
          string,
          JsonSchema
        >;
        node = properties[key];
      }
      return Object.keys(node?.['properties'] ?? {});
    };
    expect(keys(['collect', 'logs'])).toEqual(
      expect.arrayContaining(['tailLines', 'checkpointDir', 'excludeNamespaces', 'rules']),
    );
    expect(keys(['exec', 'pod'])).toEqual(
      expect.arrayContaining(['defaultShell', 'maxSessionSec', 'maxSessions', 'resumeWindowSec']),
    );
    expect(keys(['exec', 'node'])).toEqual(
      expect.arrayContaining(['helperReadyTimeoutSec', 'image']),
    );
    expect(keys(['mutate', 'node'])).toEqual(['enabled', 'nodes', 'verbs', 'maxTimeoutSec']);
    expect(keys(['collect', 'state'])).toContain('redactSecrets');
    expect(keys(['query'])).toEqual(['enabled', 'redactSecrets', 'rules']);
    expect(keys(['gateway'])).toEqual(expect.arrayContaining(['dialTimeout', 'host', 'port']));
    expect(keys(['agent'])).toEqual(['agentId']);
  });

  it('accepts the chart defaults the seed describes', () => {
    expect(
      refusals({
        image: { repository: 'ghcr.io/kubexa/kubexa-agent', tag: '' },
        rbac: { create: true, exec: false },
        gateway: { host: 'gateway.kubexa.dev', port: 443, tls: true, dialTimeout: '10s' },
        collect: {
          logs: { enabled: true, tailLines: 100, excludeNamespaces: ['kube-system'], rules: [] },
          state: {
            resyncPeriod: '5m',
            redactSecrets: false,
            rules: [{ id: 'cluster-core', namespace: '', resources: ['pods', 'secrets'] }],
          },
          metrics: { podInterval: '30s', rules: [{ id: 'm', resources: ['pods', 'nodes'] }] },
        },
        query: { enabled: true, rules: [] },
        buffer: { maxMemoryBytes: 67108864, maxDiskBytes: 536870912, flushInterval: '1s' },
        log: { level: 'info', format: 'json' },
      }),
    ).toEqual([]);
  });

  it('refuses camelCase keys inside rule lists and snake_case keys outside them', () => {
    expect(refusals({ collect: { logs: { rules: [{ podNames: ['be-*'] }] } } })).toEqual([
      '/collect/logs/rules/0 additionalProperties',
    ]);
    expect(
      refusals({ collect: { logs: { rules: [{ pod_names: ['be-*'], label_selector: 'a=b' }] } } }),
    ).toEqual([]);
    expect(refusals({ collect: { logs: { tail_lines: 50 } } })).toEqual([
      '/collect/logs additionalProperties',
    ]);
  });

  it('refuses unknown keys everywhere, the root and chart-only blocks included', () => {
    expect(refusals({ bogus: 1 })).toEqual([' additionalProperties']);
    expect(refusals({ rbac: { nodeOps2: true } })).toEqual(['/rbac additionalProperties']);
    expect(refusals({ buffer: { maxMemory: 1 } })).toEqual(['/buffer additionalProperties']);
  });

  it('refuses a number at a duration position, except 0 outside rule lists where 0 is valid', () => {
    // dial_timeout must be longer than 0, so its position takes strings only.
    expect(refusals({ gateway: { dialTimeout: 30 } })).toEqual(['/gateway/dialTimeout type']);
    expect(refusals({ gateway: { dialTimeout: 0 } })).toEqual(['/gateway/dialTimeout type']);
    expect(refusals({ collect: { state: { resyncPeriod: 30 } } })).toEqual([
      '/collect/state/resyncPeriod maximum',
    ]);
    expect(refusals({ gateway: { dialTimeout: '30' } })).toEqual(['/gateway/dialTimeout pattern']);
    expect(refusals({ gateway: { dialTimeout: '30s' } })).toEqual([]);
    expect(refusals({ collect: { state: { resyncPeriod: 0 } } })).toEqual([]);
    expect(
      refusals({ collect: { metrics: { rules: [{ resources: ['pods'], pod_interval: 0 }] } } }),
    ).toEqual(['/collect/metrics/rules/0/pod_interval type']);
    expect(
      refusals({ collect: { metrics: { rules: [{ resources: ['pods'], pod_interval: '0' }] } } }),
    ).toEqual([]);
  });

  it('refuses a quantity as a byte size and enforces bounds', () => {
    expect(refusals({ buffer: { maxDiskBytes: '512Mi' } })).toEqual(['/buffer/maxDiskBytes type']);
    expect(refusals({ mutate: { node: { maxTimeoutSec: 10 } } })).toEqual([
      '/mutate/node/maxTimeoutSec minimum',
    ]);
    expect(refusals({ mutate: { node: { verbs: ['reboot'] } } })).toEqual([
      '/mutate/node/verbs/0 enum',
    ]);
  });

  it('refuses wildcards in mutate.rules and partial wildcards in query.rules', () => {
    expect(
      refusals({
        mutate: { rules: [{ namespace: 'a', resources: ['*/scale'], verbs: ['scale'] }] },
      }),
    ).toEqual(['/mutate/rules/0/resources/0 pattern']);
    expect(refusals({ query: { rules: [{ resources: ['*'] }] } })).toEqual([]);
    expect(refusals({ query: { rules: [{ resources: ['apps/v1/*'] }] } })).toEqual([
      '/query/rules/0/resources/0 pattern',
    ]);
  });

  it('carries the bounds and formats the agent checks (issue 9, item 7)', () => {
    expect(refusals({ buffer: { flushInterval: '2h' } })).toEqual([
      '/buffer/flushInterval pattern',
    ]);
    expect(refusals({ buffer: { flushInterval: '1h' } })).toEqual([]);
    expect(refusals({ gateway: { dialTimeout: '48h' } })).toEqual(['/gateway/dialTimeout pattern']);
    expect(refusals({ observability: { metricsAddr: 9090 } })).toEqual([
      '/observability/metricsAddr type',
    ]);
    expect(refusals({ observability: { metricsAddr: '9090' } })).toEqual([
      '/observability/metricsAddr pattern',
    ]);
    expect(refusals({ gateway: { address: 'https://gw:443' } })).toEqual([
      '/gateway/address pattern',
    ]);
    expect(refusals({ gateway: { address: '' } })).toEqual([]);
    expect(refusals({ buffer: { maxDiskBytes: 1e20 } })).toEqual(['/buffer/maxDiskBytes maximum']);
    expect(refusals({ collect: { logs: { tailLines: 1e20 } } })).toEqual([
      '/collect/logs/tailLines maximum',
    ]);
    expect(refusals({ collect: { logs: { excludeNamespaces: ['prød-ünïcode'] } } })).toEqual([
      '/collect/logs/excludeNamespaces/0 pattern',
    ]);
    // A whole number is a valid name (the agent reads its text); a negative one is not.
    expect(refusals({ collect: { logs: { excludeNamespaces: [2024] } } })).toEqual([]);
    expect(refusals({ collect: { logs: { excludeNamespaces: [-1] } } })).toEqual([
      '/collect/logs/excludeNamespaces/0 minimum',
    ]);
    // A rule entry must write the keys the agent cannot default.
    expect(refusals({ query: { rules: [{ names: ['web'] }] } })).toEqual([
      '/query/rules/0 required',
    ]);
  });

  it('tells helm users to write 30s in every duration description', () => {
    const descriptions: string[] = [];
    walk(schema, (node) => {
      if (typeof node['pattern'] === 'string' && node['pattern'].startsWith('^\\+?')) {
        descriptions.push(String(node['description']));
      }
    });
    expect(descriptions.length).toBeGreaterThan(10);
    for (const text of descriptions) expect(text).toContain('write 30s, not the number 30');
  });

  it('accepts blank rule entries and blank fields inside them', () => {
    expect(
      refusals({ collect: { logs: { rules: [null, { namespace: null, pod_names: null }] } } }),
    ).toEqual([]);
  });

  it('leaves the token out: it reaches the agent through a Secret only', () => {
    expect(refusals({ agent: { tenantToken: 'x' } })).toEqual(['/agent additionalProperties']);
  });

  it('refuses a chart-only key that collides with a config key', () => {
    expect(() => valuesSchemaForConfig({ gateway: { properties: { address: {} } } })).toThrow(
      'chart-only property "gateway.address" is already a config key',
    );
    expect(() => valuesSchemaForConfig({ buffer: { type: 'string' } })).toThrow(
      /collides with a config section/,
    );
  });
});

describe('valuesToConfig', () => {
  it('maps camelCase values to snake_case config and passes rule lists verbatim', () => {
    const values = {
      image: { tag: 'x' },
      gateway: { host: 'ignored', address: 'gw:443', dialTimeout: '30s', reconnectMaxDelay: 0 },
      collect: {
        logs: {
          tailLines: 50,
          rules: [
            {
              id: 'stage-api',
              namespace: 'stage',
              pod_names: ['be-*'],
              label_selector: 'log=backend',
            },
          ],
        },
        metrics: { customEndpoints: [{ name: 'a', url: 'http://a', extra_labels: { x: 'y' } }] },
      },
      exec: { pod: { enabled: true, resumeWindowSec: -1, rules: [{ namespace: 'team-*' }] } },
      query: { redactSecrets: null },
    };
    expect(valuesToConfig(values)).toEqual({
      gateway: { address: 'gw:443', dial_timeout: '30s', reconnect_max_delay: '0' },
      collect: {
        logs: {
          tail_lines: 50,
          rules: [
            {
              id: 'stage-api',
              namespace: 'stage',
              pod_names: ['be-*'],
              label_selector: 'log=backend',
            },
          ],
        },
        metrics: { custom_endpoints: [{ name: 'a', url: 'http://a', extra_labels: { x: 'y' } }] },
      },
      exec: { pod: { enabled: true, resume_window_sec: -1, rules: [{ namespace: 'team-*' }] } },
      query: {},
    });
  });

  it('produces a config file the agent loads with the same meaning as the values', () => {
    const values = {
      gateway: { address: 'gw:443', tls: false },
      collect: {
        state: { resyncPeriod: 0, redactSecrets: true },
        logs: { excludeNamespaces: ['kube-system'] },
      },
      mutate: {
        node: { enabled: true, nodes: ['worker-*'], verbs: ['cordon'], maxTimeoutSec: 600 },
      },
    };
    expect(refusals(values)).toEqual([]);
    const { config } = loadConfig({ fileText: stringify(valuesToConfig(values)), env: BASE_ENV });
    expect(config.collect.state.resync_period).toBe(0);
    expect(config.collect.state.redact_secrets).toBe(true);
    expect(config.query.redact_secrets).toBe(true);
    expect(config.gateway.tls).toBe(false);
    expect(config.mutate.node).toEqual({
      enabled: true,
      nodes: ['worker-*'],
      verbs: ['cordon'],
      max_timeout_sec: 600,
    });
    expect(config.collect.logs.exclude_namespaces).toEqual(['kube-system']);
  });
});
