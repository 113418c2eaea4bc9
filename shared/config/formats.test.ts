// The formats the agent refused only at start, or not at all, before issue 9 item 7/8 and issue
// 13: each refusal names its key and the fix, at load and therefore in `config check`.
import { describe, expect, it } from 'vitest';
import { BASE_ENV, load, problems } from './load-for-test.js';

describe('durations: the bound is part of the written form', () => {
  it.each([
    ['buffer:\n  flush_interval: 2h\n', 'buffer.flush_interval: must be at most 1h'],
    ['gateway:\n  dial_timeout: 48h\n', 'gateway.dial_timeout: must be at most 24h'],
    ['gateway:\n  dial_timeout: 24h1s\n', 'gateway.dial_timeout: must be at most 24h'],
    ['gateway:\n  dial_timeout: 30\n', 'gateway.dial_timeout: write a duration string such as 30s'],
    ['gateway:\n  dial_timeout: 0s\n', 'gateway.dial_timeout: must be longer than 0'],
  ])('refuses %j', (yaml, start) => {
    expect(problems(yaml)).toEqual([expect.stringContaining(start)]);
  });

  it('refuses a form the chart cannot bound, naming the canonical spelling', () => {
    expect(problems('gateway:\n  dial_timeout: 1m90s\n')).toEqual([
      expect.stringContaining(
        'gateway.dial_timeout: "1m90s" is not written canonically: write 2m30s (',
      ),
    ]);
    expect(problems('gateway:\n  dial_timeout: 1h1h\n')).toEqual([
      expect.stringContaining('write 2h ('),
    ]);
  });

  it('takes the bound itself and Go-style spellings of it', () => {
    const { config } = load(
      'buffer:\n  flush_interval: 60m\ngateway:\n  dial_timeout: 24h0m0s\n  handshake_timeout: 1m0.5s\n',
    );
    expect(config.buffer.flush_interval).toBe(3_600_000);
    expect(config.gateway.dial_timeout).toBe(86_400_000);
    expect(config.gateway.handshake_timeout).toBe(60_500);
  });
});

describe('byte sizes', () => {
  it.each([
    [
      'max_memory_bytes: 0',
      'buffer.max_memory_bytes: 0 is out of range: write a whole number of bytes from 1 to 1125899906842624 (1 PiB), e.g. 536870912 for 512 MiB',
    ],
    [
      'max_disk_bytes: 1e20',
      'buffer.max_disk_bytes: 100000000000000000000 is out of range: write a whole number of bytes from 0 to 1125899906842624 (1 PiB), e.g. 536870912 for 512 MiB',
    ],
    [
      'max_disk_bytes: 1.5',
      'buffer.max_disk_bytes: 1.5 is not a whole number: write a whole number of bytes from 0 to 1125899906842624 (1 PiB), e.g. 536870912 for 512 MiB',
    ],
  ])('refuses %s with the range and the fix', (line, message) => {
    expect(problems(`buffer:\n  ${line}\n`)).toEqual([message]);
  });
});

describe('listen addresses', () => {
  it('refuses a bare port, naming the key and the fix', () => {
    expect(problems('observability:\n  metrics_addr: "9090"\n')).toEqual([
      'observability.metrics_addr: "9090" is not a listen address: write :port or host:port with a port from 0 (any free port) to 65535, e.g. ":9090" or "127.0.0.1:9090"',
    ]);
  });

  it.each([':65536', 'host:', 'a b:80', 'http://x:80', ':-1'])('refuses %j', (address) => {
    expect(problems(`observability:\n  health_addr: "${address}"\n`)).toEqual([
      expect.stringMatching(/^observability\.health_addr: .* is not a listen address/),
    ]);
  });

  it.each([':1', ':65535', '127.0.0.1:8081', '[::1]:8081', 'localhost:8081'])(
    'accepts %j',
    (address) => {
      expect(
        load(`observability:\n  health_addr: "${address}"\n`).config.observability.health_addr,
      ).toBe(address);
    },
  );

  it('takes port 0 (any free port) for every listener at once, as the tests and the demo do', () => {
    const { config } = load(
      'observability:\n  health_addr: "127.0.0.1:0"\n  metrics_addr: "127.0.0.1:0"\n  pprof_addr: ":0"\n',
    );
    expect(config.observability.metrics_addr).toBe('127.0.0.1:0');
  });

  it('refuses the health listener on the metrics port, whatever the hosts', () => {
    expect(problems('observability:\n  health_addr: "127.0.0.1:9090"\n')).toEqual([
      'observability.health_addr: uses port 9090, as observability.metrics_addr does: give each listener its own port, e.g. ":8080" and ":9090"',
    ]);
    expect(problems('observability:\n  pprof_addr: ":8080"\n')).toEqual([
      'observability.pprof_addr: uses port 8080, as observability.health_addr does: give pprof its own port, e.g. "127.0.0.1:6060"',
    ]);
  });
});

describe('gateway.address', () => {
  const env = (address: string) => ({ env: { ...BASE_ENV, KUBEXA_GATEWAY_ADDRESS: address } });

  it('refuses a URL, naming the host:port to write', () => {
    expect(problems('', env('https://gw.example.com:443'))).toEqual([
      'gateway.address: "https://gw.example.com:443" is a URL; write host:port without a scheme or path, e.g. gw.example.com:443 (gateway.tls decides whether TLS is used) (value from KUBEXA_GATEWAY_ADDRESS)',
    ]);
    expect(problems('', env('https://gw.example.com/agent'))).toEqual([
      expect.stringContaining('e.g. gw.example.com:443 '),
    ]);
  });

  it('refuses a missing port', () => {
    expect(problems('', env('gw.example.com'))).toEqual([
      'gateway.address: "gw.example.com" has no port; write host:port, e.g. gw.example.com:443 (value from KUBEXA_GATEWAY_ADDRESS)',
    ]);
  });

  it.each(['gw.example.com:0', 'gw.example.com:99999', ':443', 'gw example:443'])(
    'refuses %j',
    (address) => {
      expect(problems('', env(address))).toEqual([
        expect.stringMatching(
          /^gateway\.address: .* is not host:port; write e\.g\. gateway\.kubexa\.dev:443/,
        ),
      ]);
    },
  );

  it.each(['gw.example.com:443', '10.0.0.1:8443', '[fd00::1]:443', 'localhost:50051'])(
    'accepts %j',
    (address) => {
      expect(load('', env(address)).config.gateway.address).toBe(address);
    },
  );

  it('checks the file too, and lets the executor leave it empty but not malformed', () => {
    expect(
      problems('gateway:\n  address: gw:443/x\n', { env: { KUBEXA_TENANT_TOKEN: 'x' } }),
    ).toHaveLength(1);
    expect(load('', { env: {}, role: 'executor' }).config.gateway.address).toBe('');
    expect(problems('gateway:\n  address: gw\n', { env: {}, role: 'executor' })).toEqual([
      'gateway.address: "gw" has no port; write host:port, e.g. gw:443',
    ]);
  });
});

describe('Kubernetes names', () => {
  it.each([
    [
      'collect:\n  logs:\n    exclude_namespaces: [prød-ünïcode]\n',
      'collect.logs.exclude_namespaces[0]',
      'namespace',
    ],
    [
      'collect:\n  logs:\n    rules: [{namespace: Team-A}]\n',
      'collect.logs.rules[0].namespace',
      'namespace',
    ],
    [
      'collect:\n  logs:\n    rules: [{pod_names: ["Web-*"]}]\n',
      'collect.logs.rules[0].pod_names[0]',
      'pod name',
    ],
    [
      'collect:\n  logs:\n    rules: [{containers: ["app_1"]}]\n',
      'collect.logs.rules[0].containers[0]',
      'container name',
    ],
    [
      'query:\n  rules: [{resources: [pods], names: ["prød-*"]}]\n',
      'query.rules[0].names[0]',
      'object name',
    ],
    ['mutate:\n  node:\n    nodes: ["Node-1"]\n', 'mutate.node.nodes[0]', 'node name'],
    ['exec:\n  node:\n    namespace: kube_system\n', 'exec.node.namespace', 'namespace'],
  ])('refuses %j naming the key and the rule', (yaml, key, noun) => {
    expect(problems(yaml)).toEqual([
      expect.stringMatching(
        new RegExp(
          `^${key.replace(/[.[\]]/g, '\\$&')}: ".*" can never match a ${noun}: .*DNS-1123`,
        ),
      ),
    ]);
  });

  it('takes names, prefixes and globs where each is a pattern', () => {
    const { config } = load(
      'collect:\n  logs:\n    exclude_namespaces: [" kube-system "]\n    rules: [{namespace: team-a, pod_names: ["web-{a,b}-*", "api-?"], containers: ["!(sidecar)"]}]\nquery:\n  rules: [{namespace: "team-*", resources: [pods], names: ["*", "web.v1", "db-*"]}]\n',
    );
    expect(config.collect.logs.exclude_namespaces).toEqual(['kube-system']);
    expect(config.query.rules[0]?.names).toEqual(['*', 'web.v1', 'db-*']);
  });

  it('refuses a name longer than Kubernetes allows', () => {
    expect(
      problems(`collect:\n  logs:\n    rules: [{namespace: ${'a'.repeat(64)}}]\n`),
    ).toHaveLength(1);
    expect(
      load(`collect:\n  logs:\n    rules: [{namespace: ${'a'.repeat(63)}}]\n`).config,
    ).toBeDefined();
  });
});
