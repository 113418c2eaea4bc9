// The CLI as a real process: argv, file reading, env and the exit code.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const dir = mkdtempSync(join(tmpdir(), 'kubexa-cli-'));
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

// The child inherits this environment (only main.ts reads process); the files carry the token.
function run(args: string[]) {
  const result = spawnSync('node', ['--import', 'tsx', 'cli/main.ts', ...args], {
    encoding: 'utf8',
  });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

describe('kubexa-agent config check', () => {
  it('exits 0 for a valid file and masks the token', () => {
    const file = join(dir, 'ok.yaml');
    writeFileSync(file, 'agent:\n  tenant_token: tok-cli-secret-1\ngateway:\n  address: gw:443\n');
    const { code, stdout } = run(['config', 'check', file]);
    expect(code).toBe(0);
    expect(stdout).toContain('tenant_token: "[redacted]"');
    expect(stdout).not.toContain('tok-cli-secret-1');
  });

  it('exits 1 for an invalid file and names the key', () => {
    const file = join(dir, 'bad.yaml');
    writeFileSync(
      file,
      'agent: {tenant_token: t}\ngateway: {address: "gw:443", dial_timeout: 30}\n',
    );
    const { code, stdout } = run(['config', 'check', file]);
    expect(code).toBe(1);
    expect(stdout).toContain('error: gateway.dial_timeout: write a duration string such as 30s');
  });

  it('refuses, in one run, what the chart used to accept and the agent refused at start', () => {
    const file = join(dir, 'issue-9.yaml');
    writeFileSync(
      file,
      [
        'agent: {tenant_token: t}',
        'gateway: {address: "https://gw.example.com:443", dial_timeout: 48h}',
        'buffer: {flush_interval: 2h, max_memory_bytes: 0}',
        'observability: {metrics_addr: "9090"}',
        'collect: {logs: {exclude_namespaces: [prød-ünïcode]}}',
        '',
      ].join('\n'),
    );
    const { code, stdout } = run(['config', 'check', file]);
    expect(code).toBe(1);
    const errors = stdout.split('\n').filter((line) => line.startsWith('error: '));
    expect(errors.map((line) => line.split(':')[1]?.trim())).toEqual([
      'gateway.address',
      'gateway.dial_timeout',
      'collect.logs.exclude_namespaces[0]',
      'buffer.max_memory_bytes',
      'buffer.flush_interval',
      'observability.metrics_addr',
    ]);
    expect(stdout).toContain('e.g. gw.example.com:443');
    expect(stdout).toContain('must be at most 1h');
    expect(stdout).toContain('from 1 to 1125899906842624');
    expect(stdout).toContain('DNS-1123 label');
    expect(stdout).toContain('config check failed: 6 problems');
  });

  it('exits 1 when the file cannot be read and 2 on a usage error', () => {
    const missing = run(['config', 'check', join(dir, 'missing.yaml')]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('error: cannot read');
    const usage = run(['config']);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toBe('usage: kubexa-agent config check FILE\n');
  });
});
