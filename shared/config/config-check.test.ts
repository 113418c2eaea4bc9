import { parse } from 'yaml';
import { describe, expect, it } from 'vitest';
import { runConfigCheck } from './config-check.js';
import { BASE_ENV, TOKEN } from './load-for-test.js';

function check(fileText: string, env: Record<string, string> = BASE_ENV) {
  let output = '';
  const code = runConfigCheck({ fileText, env, write: (text) => (output += text) });
  return { code, output };
}

describe('runConfigCheck', () => {
  it('exits 0 and prints the effective config with secrets masked and durations as strings', () => {
    const { code, output } = check(
      'gateway:\n  dial_timeout: 1m30s\nquery:\n  redact_secrets: true\n',
    );
    expect(code).toBe(0);
    expect(output).not.toContain(TOKEN);
    const [comment, ...rest] = output.split('\n');
    expect(comment).toMatch(/^# effective configuration/);
    const printed = parse(rest.join('\n')) as Record<string, Record<string, unknown>>;
    expect(printed['agent']).toEqual({ tenant_token: '[redacted]', agent_id: '' });
    expect(printed['gateway']).toMatchObject({ address: 'gw.example:443', dial_timeout: '1m30s' });
    expect(printed['query']).toMatchObject({ enabled: true, redact_secrets: true });
  });

  it('prints warnings before the config and still exits 0', () => {
    const { code, output } = check('collect:\n  logs:\n    rules: [{podNames: [a]}]\n');
    expect(code).toBe(0);
    expect(output.split('\n')[0]).toBe(
      'warning: unrecognized config key ignored: collect.logs.rules[0].podNames (did you mean pod_names?)',
    );
  });

  it('exits 1 and prints every error, the warnings first, and a count', () => {
    const { code, output } = check(
      'gateway:\n  dial_timeout: 30\n  dialTimeout: 30s\nlog: {level: loud}\n',
    );
    expect(code).toBe(1);
    expect(output).toBe(
      [
        'warning: unrecognized config key ignored: gateway.dialTimeout (did you mean dial_timeout?)',
        'error: gateway.dial_timeout: write a duration string such as 30s, not the number 30',
        'error: log.level: must be one of: trace, debug, info, warn, error, fatal',
        'config check failed: 2 problems',
        '',
      ].join('\n'),
    );
  });

  it('never prints the token, whether the config is valid or not', () => {
    const withTokenInFile = `agent:\n  tenant_token: ${TOKEN}\ngateway: {address: "a:1"}\n`;
    expect(check(withTokenInFile, {}).output).not.toContain(TOKEN);
    const broken = `agent:\n  tenant_token: ${TOKEN}\n  ${TOKEN}: 1\nlog: {level: loud}\n`;
    const { code, output } = check(broken, {});
    expect(code).toBe(1);
    expect(output).not.toContain(TOKEN);
    expect(output).toContain('unrecognized config key ignored: agent.[redacted]');
  });
});
