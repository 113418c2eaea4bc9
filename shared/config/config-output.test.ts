import { describe, expect, it } from 'vitest';
import { maskSecrets, REDACTED, toConfigDocument } from './config-output.js';
import { load, TOKEN } from './load-for-test.js';

describe('maskSecrets', () => {
  it('replaces the token and URL credentials and leaves everything else as loaded', () => {
    const { config } = load(
      'collect:\n  metrics:\n    custom_endpoints:\n      - {name: a, url: "https://user:pw@metrics.example/metrics"}\n      - {name: b, url: "http://plain.example/metrics"}\n',
    );
    const masked = maskSecrets(config);
    expect(masked.agent.tenant_token).toBe(REDACTED);
    expect(masked.collect.metrics.custom_endpoints.map((endpoint) => endpoint.url)).toEqual([
      'https://redacted@metrics.example/metrics',
      'http://plain.example/metrics',
    ]);
    expect(JSON.stringify(masked)).not.toContain(TOKEN);
    expect(JSON.stringify(masked)).not.toContain('pw@');
    expect({ ...masked, agent: config.agent, collect: config.collect }).toEqual(config);
    expect(config.agent.tenant_token).toBe(TOKEN);
  });
});

describe('toConfigDocument', () => {
  it('writes durations back in the file syntax, rule-level ones included', () => {
    const { config } = load(
      'collect:\n  state:\n    rules: [{resources: [pods], resync_period: 90s}]\n',
    );
    const doc = toConfigDocument(config) as {
      gateway: Record<string, unknown>;
      collect: { state: { resync_period: unknown; rules: Record<string, unknown>[] } };
    };
    expect(doc.gateway['reconnect_max_delay']).toBe('15s');
    expect(doc.collect.state.resync_period).toBe('5m');
    expect(doc.collect.state.rules[0]?.['resync_period']).toBe('1m30s');
  });
});
