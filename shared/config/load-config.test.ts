import { describe, expect, it } from 'vitest';
import { ConfigError } from '../errors.js';
import { loadConfig } from './load-config.js';
import { BASE_ENV, load, loadError, problemPaths, problems, TOKEN } from './load-for-test.js';

describe('loadConfig: defaults', () => {
  it('fills every section with the Go agent defaults', () => {
    const { config, warnings } = load('');
    expect(warnings).toEqual([]);
    expect(config.gateway).toEqual({
      address: 'gw.example:443',
      tls: true,
      insecure_skip_verify: false,
      allow_insecure: false,
      ca_cert_path: '',
      reconnect_initial_delay: 1_000,
      reconnect_max_delay: 15_000,
      dial_timeout: 10_000,
      handshake_timeout: 10_000,
    });
    expect(config.collect.logs).toMatchObject({
      enabled: true,
      tail_lines: 100,
      follow: true,
      checkpoint_dir: '',
      exclude_namespaces: [],
    });
    expect(config.collect.logs.rules).toEqual([
      expect.objectContaining({ id: 'logs-0', namespace: '', pod_names: [] }),
    ]);
    expect(config.collect.state).toMatchObject({
      enabled: true,
      resync_period: 300_000,
      redact_secrets: false,
    });
    expect(config.collect.state.rules).toEqual([
      expect.objectContaining({
        id: 'state-0',
        resources: ['pods', 'services', 'secrets', 'deployments'],
      }),
    ]);
    expect(config.collect.metrics).toMatchObject({
      enabled: true,
      pod_interval: 30_000,
      node_interval: 30_000,
    });
    expect(config.collect.metrics.rules).toEqual([
      expect.objectContaining({ id: 'metrics-0', resources: ['pods', 'nodes'] }),
    ]);
    expect(config.collect.events).toEqual({
      enabled: true,
      kubernetes_events: true,
      pod_lifecycle: true,
      exclude_namespaces: [],
    });
    expect(config.buffer).toEqual({
      max_memory_bytes: 67_108_864,
      spill_dir: '',
      max_disk_bytes: 536_870_912,
      batch_size: 100,
      flush_interval: 1_000,
    });
    expect(config.observability).toEqual({
      metrics_addr: ':9090',
      health_addr: ':8080',
      pprof_addr: '',
    });
    expect(config.log).toEqual({ level: 'info', format: 'json' });
  });

  it('keeps every privileged feature off by default', () => {
    const { config } = load('');
    expect(config.mutate.enabled).toBe(false);
    expect(config.mutate.node).toEqual({
      enabled: false,
      nodes: [],
      verbs: [],
      max_timeout_sec: 3600,
    });
    expect(config.exec.pod).toMatchObject({ enabled: false, rules: [], default_shell: '/bin/sh' });
    expect(config.exec.node).toMatchObject({ enabled: false, image: '' });
  });

  it('reads durations as milliseconds and byte sizes as integers', () => {
    const { config } = load(
      'gateway:\n  dial_timeout: 1m30s\n  handshake_timeout: 500ms\ncollect:\n  state:\n    resync_period: "0"\nbuffer:\n  max_memory_bytes: 1048576\n',
    );
    expect(config.gateway.dial_timeout).toBe(90_000);
    expect(config.gateway.handshake_timeout).toBe(500);
    expect(config.collect.state.resync_period).toBe(0);
    expect(config.buffer.max_memory_bytes).toBe(1_048_576);
  });

  it('treats an empty or comment-only file as all defaults', () => {
    expect(load('# nothing here\n').config.log.level).toBe('info');
  });
});

describe('loadConfig: env overrides', () => {
  it('lets every non-empty variable win over the file', () => {
    const { config } = loadConfig({
      fileText:
        'agent: {tenant_token: from-file, agent_id: file-id}\ngateway: {address: file:1}\nlog: {level: info}\n',
      env: {
        KUBEXA_TENANT_TOKEN: TOKEN,
        KUBEXA_AGENT_ID: 'env-id',
        KUBEXA_GATEWAY_ADDRESS: 'env:2',
        KUBEXA_LOG_LEVEL: 'debug',
      },
    });
    expect(config.agent).toEqual({ tenant_token: TOKEN, agent_id: 'env-id' });
    expect(config.gateway.address).toBe('env:2');
    expect(config.log.level).toBe('debug');
  });

  it('ignores empty variables', () => {
    const { config } = loadConfig({
      fileText: 'agent: {tenant_token: from-file}\ngateway: {address: file:1}\n',
      env: { KUBEXA_TENANT_TOKEN: '', KUBEXA_GATEWAY_ADDRESS: '' },
    });
    expect(config.agent.tenant_token).toBe('from-file');
    expect(config.gateway.address).toBe('file:1');
  });

  it('creates a section the file leaves blank', () => {
    expect(load('agent:\ngateway:\n').config.gateway.address).toBe('gw.example:443');
  });

  it('names the variable when its value is refused', () => {
    expect(problems('', { env: { ...BASE_ENV, KUBEXA_LOG_LEVEL: 'loud' } })).toEqual([
      'log.level: must be one of: trace, debug, info, warn, error, fatal (value from KUBEXA_LOG_LEVEL)',
    ]);
  });

  it('requires the token and the gateway address of the collector', () => {
    expect(problemPaths('', { env: {} })).toEqual(['agent.tenant_token', 'gateway.address']);
  });

  it('does not require them of the executor, which never talks to the gateway', () => {
    const { config } = loadConfig({ fileText: '', env: {}, role: 'executor' });
    expect(config.agent.tenant_token).toBe('');
  });

  it('fills agent_id from createAgentId only when nothing sets it', () => {
    expect(load('', { createAgentId: () => 'generated' }).config.agent.agent_id).toBe('generated');
    expect(
      load('agent: {agent_id: mine}\n', { createAgentId: () => 'generated' }).config.agent.agent_id,
    ).toBe('mine');
    expect(load('').config.agent.agent_id).toBe('');
  });
});

describe('loadConfig: unknown keys', () => {
  it('warns about each unknown key by its full path and keeps loading', () => {
    const { config, warnings } = load(
      [
        'cluster_id: abc',
        'gateway:',
        '  dialTimeout: 30s',
        'collect:',
        '  logs:',
        '    rules:',
        '      - namespace: stage',
        '        podNames: ["be-*"]',
        '  mystery: {a: 1}',
        '',
      ].join('\n'),
    );
    expect(warnings).toEqual([
      'unrecognized config key ignored: cluster_id',
      'unrecognized config key ignored: gateway.dialTimeout (did you mean dial_timeout?)',
      'unrecognized config key ignored: collect.logs.rules[0].podNames (did you mean pod_names?)',
      'unrecognized config key ignored: collect.mystery',
    ]);
    expect(config.collect.logs.rules[0]?.pod_names).toEqual([]);
    expect(config.gateway.dial_timeout).toBe(10_000);
  });

  it('names the position in the file, counting blank entries', () => {
    const { warnings } = load(
      'collect:\n  logs:\n    rules:\n      -\n      - {namespace: a, podNames: [x]}\n',
    );
    expect(warnings).toEqual([
      'unrecognized config key ignored: collect.logs.rules[1].podNames (did you mean pod_names?)',
    ]);
  });

  it('returns the warnings with a refusal too', () => {
    const err = loadError('gateway:\n  dialTimeout: 30s\n  dial_timeout: 30\n');
    expect(err.warnings).toEqual([
      'unrecognized config key ignored: gateway.dialTimeout (did you mean dial_timeout?)',
    ]);
  });
});

describe('loadConfig: blank values (read as yaml.v3 did)', () => {
  it('skips blank list entries', () => {
    const { config } = load(
      'collect:\n  logs:\n    rules:\n      -\n      - namespace: stage\n      - ~\n    exclude_namespaces: [a, ~, b]\n',
    );
    expect(config.collect.logs.rules.map((rule) => [rule.id, rule.namespace])).toEqual([
      ['logs-0', 'stage'],
    ]);
    expect(config.collect.logs.exclude_namespaces).toEqual(['a', 'b']);
  });

  it('reads a blank field in a rule as not set', () => {
    const { config } = load(
      'collect:\n  logs:\n    rules:\n      - namespace:\n        pod_names:\n        tail_lines:\n',
    );
    expect(config.collect.logs.rules[0]).toMatchObject({ namespace: '', pod_names: [] });
    expect(config.collect.logs.rules[0]?.tail_lines).toBeUndefined();
  });

  it('reads a blank section or scalar as not set, so its default applies', () => {
    const { config } = load('buffer:\n  batch_size:\nlog:\n');
    expect(config.buffer.batch_size).toBe(100);
    expect(config.log.level).toBe('info');
  });

  it('keeps a blank label value as an active filter on the empty value', () => {
    const { config } = load('collect:\n  logs:\n    rules:\n      - labels: {team: , app: web}\n');
    expect(config.collect.logs.rules[0]?.labels).toEqual({ team: '', app: 'web' });
    expect(config.collect.logs.rules[0]?.label_selector).toBe('app=web,team=');
  });

  it('reads a YAML number at a string position as its text', () => {
    const { config } = load('collect:\n  logs:\n    rules:\n      - namespace: 2024\n');
    expect(config.collect.logs.rules[0]?.namespace).toBe('2024');
  });
});

describe('loadConfig: durations', () => {
  it('refuses a bare number, naming the key and the fix', () => {
    expect(problems('gateway:\n  dial_timeout: 30\n')).toEqual([
      'gateway.dial_timeout: write a duration string such as 30s, not the number 30',
    ]);
  });

  it('refuses a bare 0 too, asking for the quoted string', () => {
    expect(problems('collect:\n  state:\n    resync_period: 0\n')).toEqual([
      'collect.state.resync_period: write the duration as the string "0" (quoted), not the number 0',
    ]);
  });

  it('refuses any number inside a rule entry', () => {
    expect(
      problems(
        'collect:\n  metrics:\n    rules:\n      - resources: [pods]\n        pod_interval: 0\n',
      ),
    ).toEqual([
      'collect.metrics.rules[0].pod_interval: write the duration as the string "0" (quoted), not the number 0',
    ]);
  });

  it('refuses a string without a unit and a negative duration', () => {
    expect(problems('gateway:\n  dial_timeout: "30"\n  handshake_timeout: -1s\n')).toEqual([
      'gateway.dial_timeout: "30" is not a duration: write it like 30s, 1m30s, 500ms or "0" (the unit is required)',
      'gateway.handshake_timeout: must not be negative',
    ]);
  });

  it('refuses 0 where a zero duration would spin', () => {
    expect(
      problemPaths('gateway:\n  reconnect_initial_delay: "0"\nbuffer:\n  flush_interval: "0"\n'),
    ).toEqual(['gateway.reconnect_initial_delay', 'buffer.flush_interval']);
  });

  it('refuses a duration longer than its maximum, naming the key and the bound', () => {
    expect(
      problems(
        'gateway:\n  reconnect_max_delay: 600h\n  dial_timeout: 25h\n  handshake_timeout: 24h\nbuffer:\n  flush_interval: 2h\n',
      ),
    ).toEqual([
      'gateway.reconnect_max_delay: must be at most 24h: write a shorter duration such as 30s or 24h',
      'gateway.dial_timeout: must be at most 24h: write a shorter duration such as 30s or 24h',
      'buffer.flush_interval: must be at most 1h: write a shorter duration such as 30s or 1h',
    ]);
    expect(
      problemPaths(
        'collect:\n  state:\n    resync_period: 48h\n    rules:\n      - resources: [pods]\n        resync_period: 25h\n',
      ),
    ).toEqual(['collect.state.resync_period', 'collect.state.rules[0].resync_period']);
    expect(load('buffer:\n  flush_interval: 1h\n').config.buffer.flush_interval).toBe(3_600_000);
  });

  it('bounds buffer.batch_size to [1, 10000]', () => {
    expect(problems('buffer:\n  batch_size: 10001\n')).toEqual([
      'buffer.batch_size: must be at most 10000',
    ]);
    expect(load('buffer:\n  batch_size: 10000\n').config.buffer.batch_size).toBe(10_000);
  });

  it('keeps rule-level durations unset unless written', () => {
    const { config } = load(
      'collect:\n  state:\n    rules:\n      - resources: [pods]\n        resync_period: 1m\n      - resources: [secrets]\n',
    );
    expect(config.collect.state.rules.map((rule) => rule.resync_period)).toEqual([
      60_000,
      undefined,
    ]);
  });
});

describe('loadConfig: types', () => {
  it('refuses a quoted boolean, a quantity as a byte size, and a string for a number', () => {
    expect(
      problems('gateway:\n  tls: "true"\nbuffer:\n  max_disk_bytes: 512Mi\n  batch_size: ten\n'),
    ).toEqual([
      'gateway.tls: expected true or false, got a string (write it without quotes)',
      'buffer.max_disk_bytes: write a whole number of bytes from 0 to 1125899906842624 (1 PiB), e.g. 536870912 for 512 MiB (quantities such as 512Mi are not read)',
      'buffer.batch_size: expected a whole number, got a string',
    ]);
  });

  it('refuses a file that is not a mapping', () => {
    expect(loadError('- a\n- b\n').issues).toEqual([
      {
        path: '',
        message: 'the file must be a YAML mapping of sections (agent, gateway, collect, ...)',
      },
    ]);
  });

  it('reports invalid YAML with its position', () => {
    const [issue] = loadError('gateway:\n  address: [unclosed\n').issues;
    expect(issue?.path).toBe('');
    expect(issue?.message).toMatch(/^line \d+, column \d+: .*\(the file is not valid YAML\)$/);
  });

  it('reads only the first YAML document, with a warning', () => {
    const { config, warnings } = load('log: {level: debug}\n---\nlog: {level: error}\n');
    expect(config.log.level).toBe('debug');
    expect(warnings).toEqual(['only the first YAML document is read; 1 more ignored']);
  });
});

describe('loadConfig: reporting', () => {
  it('reports every violation at once, each naming its key', () => {
    const err = loadError(
      [
        'gateway:',
        '  tls: yes please',
        '  dial_timeout: 30',
        'collect:',
        '  logs:',
        '    tail_lines: -1',
        '  state:',
        '    rules: [{resources: ["*"]}]',
        'mutate:',
        '  rules: [{namespace: default, resources: ["*"], verbs: [patch]}]',
        'exec:',
        '  node: {enabled: true, image: ""}',
        'log: {format: xml}',
        '',
      ].join('\n'),
    );
    expect(err).toBeInstanceOf(ConfigError);
    expect(err.code).toBe('ERR_CONFIG_INVALID');
    expect(err.issues.map((issue) => issue.path)).toEqual([
      'gateway.tls',
      'gateway.dial_timeout',
      'collect.logs.tail_lines',
      'collect.state.rules[0].resources[0]',
      'mutate.rules[0].resources[0]',
      'exec.node.image',
      'log.format',
    ]);
    expect(err.message).toMatch(/^invalid configuration \(7 problems\):\n {2}- gateway\.tls: /);
    for (const issue of err.issues) expect(issue.message.length).toBeGreaterThan(10);
  });

  it('never puts the token in an error, a warning or the message', () => {
    const secret = 'tok-LEAK-CHECK-42';
    const attempts = [
      `agent:\n  tenant_token: [${secret}]\n`,
      `agent:\n  tenant_token: {${secret}: 1}\n`,
      `agent:\n  tenant_token: ${secret}: x\n`,
      `agent:\n  tenant_token: "${secret}\n`,
      `agent:\n  tenant_token: ${secret}\n  ${secret}: 1\ngateway: {address: ""}\n`,
    ];
    for (const fileText of attempts) {
      let text: string;
      try {
        const { warnings } = loadConfig({ fileText, env: {} });
        text = warnings.join('\n');
      } catch (err: unknown) {
        if (!(err instanceof ConfigError)) throw err;
        text = [err.message, ...err.warnings, JSON.stringify(err.issues)].join('\n');
      }
      expect(text, fileText).not.toContain(secret);
    }
    const err = loadError('log: {level: loud}\n', { env: { KUBEXA_TENANT_TOKEN: secret } });
    expect(err.message).not.toContain(secret);
  });
});

describe('loadConfig: result', () => {
  it('is deep-frozen', () => {
    const { config } = load('collect:\n  logs:\n    rules: [{namespace: a, labels: {x: y}}]\n');
    expect(Object.isFrozen(config)).toBe(true);
    expect(Object.isFrozen(config.collect.logs)).toBe(true);
    expect(Object.isFrozen(config.collect.logs.rules)).toBe(true);
    expect(Object.isFrozen(config.collect.logs.rules[0]?.labels)).toBe(true);
    expect(() => {
      (config.gateway as { tls: boolean }).tls = false;
    }).toThrow(TypeError);
    expect(() => {
      (config.collect.logs.rules as unknown[]).push({});
    }).toThrow(TypeError);
  });
});
