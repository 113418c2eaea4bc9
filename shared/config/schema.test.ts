import { describe, expect, it } from 'vitest';
import { load, problemPaths, problems } from './load-for-test.js';
import { HELPER_IMAGE_DIGEST_MESSAGE } from './schema.js';

/** A digest suffix for the node-shell helper image, which must be pinned. */
const DIGEST = `@sha256:${'a'.repeat(64)}`;

const execPod = (fields: string, extra = '') => `exec:\n  pod:\n${fields}${extra}`;

describe('exec.pod', () => {
  it.each([
    ['max_session_sec', 9, false],
    ['max_session_sec', 10, true],
    ['max_session_sec', 86_400, true],
    ['max_session_sec', 86_401, false],
    ['max_sessions', 0, false],
    ['max_sessions', 1, true],
    ['max_sessions', 64, true],
    ['max_sessions', 65, false],
    ['resume_window_sec', 600, true],
    ['resume_window_sec', 601, false],
    ['resume_window_sec', -5, true],
  ])('while enabled, %s %d is accepted: %s', (key, value, accepted) => {
    const yaml = execPod(
      `    enabled: true\n    rules: [{namespace: team-a}]\n    ${key}: ${value}\n`,
    );
    if (accepted) expect(load(yaml).config.exec.pod.enabled).toBe(true);
    else expect(problemPaths(yaml)).toEqual([`exec.pod.${key}`]);
  });

  it('reads resume_window_sec 0 as 60 and keeps a negative value (no resume)', () => {
    expect(load(execPod('    resume_window_sec: 0\n')).config.exec.pod.resume_window_sec).toBe(60);
    expect(load(execPod('    resume_window_sec: -1\n')).config.exec.pod.resume_window_sec).toBe(-1);
    expect(load(execPod('    resume_window_sec: 120\n')).config.exec.pod.resume_window_sec).toBe(
      120,
    );
  });

  it('refuses a rule that fails validation while enabled', () => {
    expect(
      problems(
        execPod(
          '    enabled: true\n    rules:\n      - names: ["web-*"]\n      - namespace: "a*b"\n        containers: ["x?"]\n',
        ),
      ),
    ).toEqual([
      'exec.pod.rules[1].namespace: "a*b" can never match a namespace: write a namespace, or a prefix ending in "*" such as "web-*" ("*" alone matches every one; "*" elsewhere and ? [ ] { } ! are not patterns here); Kubernetes namespaces are lowercase letters, digits and "-", starting and ending with a letter or digit, at most 63 characters (DNS-1123 label)',
      'exec.pod.rules[1].containers[0]: "x?" can never match a container name: write a container name, or a prefix ending in "*" such as "web-*" ("*" alone matches every one; "*" elsewhere and ? [ ] { } ! are not patterns here); Kubernetes container names are lowercase letters, digits and "-", starting and ending with a letter or digit, at most 63 characters (DNS-1123 label)',
      'exec.pod.rules[0].namespace: name a namespace or a pattern ("*" for every namespace); a privileged rule never defaults to all',
    ]);
  });

  it('only warns about the same rule and scalars while exec.pod and exec.node are off', () => {
    const { config, warnings } = load(
      execPod('    rules:\n      - names: ["web-*"]\n    max_sessions: 500\n'),
    );
    expect(config.exec.pod.enabled).toBe(false);
    expect(warnings).toEqual([
      'exec.pod.max_sessions: 500 is out of range; use a value from 1 to 64 (not an error while exec.pod and exec.node are disabled)',
      'exec.pod.rules[0].namespace: name a namespace or a pattern ("*" for every namespace); a privileged rule never defaults to all (not an error while exec.pod and exec.node are disabled)',
    ]);
  });

  it('is validated, rules and scalars, while exec.node is on even with exec.pod off', () => {
    const yaml =
      execPod('    rules: [{names: [x]}]\n    max_sessions: 500\n') +
      `  node: {enabled: true, image: "busybox:1.36${DIGEST}"}\n`;
    const lines = problems(yaml);
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(
      /^exec\.pod\.max_sessions: 500 is out of range.*\(exec\.node is enabled/,
    );
    expect(lines[1]).toMatch(/^exec\.pod\.rules\[0\]\.namespace: name a namespace/);
  });

  it('warns that an enabled exec.pod with no rules allows nothing', () => {
    expect(load(execPod('    enabled: true\n')).warnings).toEqual([
      'exec.pod.rules: is empty, so no pod console is allowed; add a rule naming a namespace',
    ]);
  });

  it('gives rules ids by position unless they have their own', () => {
    const { config } = load(execPod('    rules: [{namespace: a}, {id: mine, namespace: b}]\n'));
    expect(config.exec.pod.rules.map((rule) => rule.id)).toEqual(['exec-pod-0', 'mine']);
  });
});

describe('exec.node', () => {
  it('requires an image while enabled, and only then', () => {
    expect(problems('exec:\n  node: {enabled: true}\n')).toEqual([
      'exec.node.image: is required while exec.node is enabled: any image with sleep and nsenter',
    ]);
    expect(load('exec:\n  node: {enabled: false}\n').config.exec.node.image).toBe('');
  });

  it('requires the helper image pinned by digest, whether enabled or not', () => {
    const image = (enabled: boolean, value: string) =>
      `exec:\n  node: {enabled: ${String(enabled)}, image: ${JSON.stringify(value)}}\n`;
    for (const tagged of [
      'busybox',
      'busybox:1.36',
      'busybox@sha256:abc',
      'busybox@sha512:' + 'a'.repeat(64),
    ]) {
      for (const enabled of [true, false]) {
        expect(problems(image(enabled, tagged)), tagged).toEqual([
          `exec.node.image: ${HELPER_IMAGE_DIGEST_MESSAGE}`,
        ]);
      }
    }
    for (const pinned of [
      `busybox${DIGEST}`,
      `registry.example.com:5000/tools/nsenter:1.0${DIGEST}`,
    ]) {
      expect(load(image(true, pinned)).config.exec.node.image, pinned).toBe(pinned);
    }
  });

  it('requires max_session_sec >= helper_ready_timeout_sec while enabled', () => {
    const node = (a: number, b: number) =>
      `exec:\n  pod: {rules: [{namespace: a}]}\n  node: {enabled: true, image: "img${DIGEST}", max_session_sec: ${a}, helper_ready_timeout_sec: ${b}}\n`;
    expect(problems(node(60, 120))).toEqual([
      'exec.node.max_session_sec: must be at least exec.node.helper_ready_timeout_sec (120): the session clock includes the helper wait',
    ]);
    expect(load(node(120, 120)).config.exec.node.max_session_sec).toBe(120);
  });

  it('bounds max_session_sec to [10, 86400]', () => {
    expect(problemPaths('exec:\n  node: {max_session_sec: 5}\n')).toEqual([
      'exec.node.max_session_sec',
    ]);
    expect(problemPaths('exec:\n  node: {max_session_sec: 86401}\n')).toEqual([
      'exec.node.max_session_sec',
    ]);
  });
});

describe('mutate.node', () => {
  const node = (fields: string) => `mutate:\n  node: {${fields}}\n`;

  it('bounds max_timeout_sec to [30, 86400]', () => {
    expect(problems(node('max_timeout_sec: 29'))).toEqual([
      'mutate.node.max_timeout_sec: must be at least 30',
    ]);
    expect(problems(node('max_timeout_sec: 86401'))).toEqual([
      'mutate.node.max_timeout_sec: must be at most 86400',
    ]);
    expect(load(node('max_timeout_sec: 30')).config.mutate.node.max_timeout_sec).toBe(30);
    expect(load(node('max_timeout_sec: 86400')).config.mutate.node.max_timeout_sec).toBe(86_400);
  });

  it('accepts verbs only from cordon, uncordon, drain', () => {
    expect(problems(node('verbs: [cordon, reboot]'))).toEqual([
      'mutate.node.verbs[1]: must be one of: cordon, uncordon, drain',
    ]);
  });

  it('refuses an empty verbs list while enabled', () => {
    expect(problems(node('enabled: true, nodes: ["*"]'))).toEqual([
      'mutate.node.verbs: list the node jobs to allow, a subset of [cordon, uncordon, drain] (an empty list grants nothing)',
    ]);
    expect(load(node('enabled: false')).config.mutate.node.verbs).toEqual([]);
  });

  it('keeps empty nodes (matches nothing) and warns about it while enabled', () => {
    const { config, warnings } = load(node('enabled: true, verbs: [cordon, cordon]'));
    expect(config.mutate.node.nodes).toEqual([]);
    expect(config.mutate.node.verbs).toEqual(['cordon']);
    expect(warnings).toEqual([
      'mutate.node.nodes: is empty, so no node job is allowed; add node name patterns such as "*"',
    ]);
  });

  it('refuses unsupported node patterns', () => {
    expect(problemPaths(node('nodes: ["worker-*", "*-pool", "w[1]"]'))).toEqual([
      'mutate.node.nodes[1]',
      'mutate.node.nodes[2]',
    ]);
  });
});

describe('mutate.rules', () => {
  const rule = (resources: string) =>
    `mutate:\n  rules:\n    - namespace: default\n      resources: ${resources}\n      verbs: [scale]\n`;

  it.each(['"*"', '" * "', '"apps/v1/*"', '"*/scale"', '"deploy*"', '"apps/*/deployments"'])(
    'refuses the wildcard form %s, enabled or not',
    (form) => {
      const lines = problems(rule(`[${form}]`));
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(
        /^mutate\.rules\[0\]\.resources\[0\]: ".*" is a wildcard, and mutate\.rules refuse every wildcard form/,
      );
    },
  );

  it('accepts named resources in every spelling', () => {
    const { config } = load(
      rule('[deployments, v1/configmaps, apps/v1/statefulsets, example.com/v1/widgets]'),
    );
    expect(config.mutate.rules[0]).toMatchObject({ id: 'mutate-0', verbs: ['scale'] });
  });

  it('refuses unknown spellings, a missing namespace, no resources and no verbs', () => {
    expect(
      problems(
        'mutate:\n  rules:\n    - resources: [a/b/c/d]\n    - namespace: x\n      verbs: [patch]\n',
      ),
    ).toEqual([
      'mutate.rules[0].namespace: name a namespace or a pattern ("*" for every namespace); a privileged rule never defaults to all',
      'mutate.rules[0].resources[0]: "a/b/c/d" is not a resource: write an alias such as pods or deployments, version/resource for the core group (v1/pods), or group/version/resource (apps/v1/deployments)',
      'mutate.rules[0].verbs: list the operations to allow, e.g. [scale, patch] (an empty list grants nothing)',
      'mutate.rules[1].resources: list at least one resource, e.g. [deployments]',
    ]);
  });

  it('refuses verbs outside create, patch, update, delete, scale and repeated ids', () => {
    expect(
      problems(
        'mutate:\n  rules:\n    - {id: r, namespace: a, resources: [pods], verbs: [exec]}\n    - {id: r, namespace: a, resources: [pods], verbs: [delete]}\n',
      ),
    ).toEqual(['mutate.rules[0].verbs[0]: must be one of: create, patch, update, delete, scale']);
    expect(
      problems(
        'mutate:\n  rules:\n    - {id: r, namespace: a, resources: [pods], verbs: [patch]}\n    - {id: r, namespace: a, resources: [pods], verbs: [delete]}\n',
      ),
    ).toEqual(['mutate.rules[1].id: "r" is duplicated; give each rule its own id']);
  });

  it('warns that enabled mutations with no rules allow nothing', () => {
    expect(load('mutate: {enabled: true}\n').warnings).toEqual([
      'mutate.rules: is empty, so no mutation is allowed',
    ]);
  });
});

describe('query', () => {
  const state =
    'collect:\n  state:\n    redact_secrets: true\n    rules:\n      - {id: core, namespace: prod, resources: [pods, secrets], label_selector: a=b}\n';

  it('inherits collect.state entirely when omitted', () => {
    const { config } = load(state);
    expect(config.query).toEqual({
      enabled: true,
      redact_secrets: true,
      rules: [
        {
          id: 'core',
          namespace: 'prod',
          resources: ['pods', 'secrets'],
          names: [],
          verbs: [],
          label_selector: 'a=b',
          field_selector: '',
        },
      ],
    });
  });

  it('inherits per field: redact_secrets alone overrides, rules still inherited', () => {
    const { config } = load(`${state}query:\n  redact_secrets: false\n`);
    expect(config.query.redact_secrets).toBe(false);
    expect(config.query.rules.map((rule) => rule.id)).toEqual(['core']);
  });

  it('uses its own rules when set, and an empty list still inherits', () => {
    const own = load(`${state}query:\n  rules: [{resources: [deployments], verbs: [" LIST "]}]\n`)
      .config.query;
    expect(own.rules).toEqual([
      expect.objectContaining({ id: 'query-0', resources: ['deployments'], verbs: ['list'] }),
    ]);
    expect(own.redact_secrets).toBe(true);
    expect(load(`${state}query:\n  rules: []\n`).config.query.rules.map((rule) => rule.id)).toEqual(
      ['core'],
    );
  });

  it('can be disabled while keeping inherited rules', () => {
    expect(load('query: {enabled: false}\n').config.query.enabled).toBe(false);
  });

  it('accepts the bare "*" and refuses partial wildcards, bad patterns and verbs (always, even disabled)', () => {
    expect(
      problemPaths(
        'query:\n  enabled: false\n  rules:\n    - resources: ["*", " * ", "apps/v1/*", "x/y/z/w"]\n      names: ["a*", "*b"]\n      namespace: "t*x"\n      verbs: [get, watch]\n    - {}\n',
      ),
    ).toEqual([
      'query.rules[0].namespace',
      'query.rules[0].resources[2]',
      'query.rules[0].resources[3]',
      'query.rules[0].names[1]',
      'query.rules[0].verbs[1]',
      'query.rules[1].resources',
    ]);
  });

  it('warns when a wildcard rule meets unredacted Secrets', () => {
    expect(load('query:\n  rules: [{id: all, resources: ["*"]}]\n').warnings).toEqual([
      'query.rules: rule "all" permits every resource and Secret values are not redacted; set query.redact_secrets: true or name the resources',
    ]);
  });
});

describe('collect', () => {
  it('refuses a wildcard in collect.state.rules, which only query.rules may use', () => {
    expect(problems('collect:\n  state:\n    rules: [{resources: [pods, "*"]}]\n')).toEqual([
      'collect.state.rules[0].resources[1]: "*" is a wildcard, which only query.rules may use (a watch needs concrete resources); name them, e.g. [pods, deployments]',
    ]);
  });

  it('checks the spelling of collect.state.rules whether enabled or not, as the chart does', () => {
    const yaml = 'collect:\n  state:\n    enabled: false\n    rules: [{resources: ["*"]}]\n';
    expect(problemPaths(yaml)).toEqual(['collect.state.rules[0].resources[0]']);
    expect(problemPaths(`${yaml}query:\n  rules: [{resources: [pods]}]\n`)).toEqual([
      'collect.state.rules[0].resources[0]',
    ]);
  });

  it('refuses a state rule without resources or with an unknown spelling', () => {
    expect(
      problemPaths('collect:\n  state:\n    rules: [{resources: []}, {resources: ["a/b/c/d"]}]\n'),
    ).toEqual(['collect.state.rules[0].resources', 'collect.state.rules[1].resources[0]']);
  });

  it('accepts only pods and nodes as metrics resources', () => {
    expect(
      problems('collect:\n  metrics:\n    rules: [{resources: [Pods, node, services]}]\n'),
    ).toEqual([
      'collect.metrics.rules[0].resources[2]: "services" is not supported; use pods or nodes',
    ]);
  });

  it('refuses a custom endpoint that is not an http(s) URL without quoting it', () => {
    const lines = problems(
      'collect:\n  metrics:\n    custom_endpoints: [{name: a, url: "ftp://u:pw@h/x"}]\n',
    );
    expect(lines).toEqual([
      'collect.metrics.custom_endpoints[0].url: must be an http:// or https:// URL',
    ]);
  });

  it('refuses duplicated rule ids and ".." in checkpoint_dir while logs are enabled', () => {
    expect(
      problems(
        'collect:\n  logs:\n    checkpoint_dir: /data/../etc\n    rules: [{id: a}, {id: a}]\n',
      ),
    ).toEqual([
      'collect.logs.checkpoint_dir: must not contain ".."; write a plain path such as /var/lib/kubexa/log-checkpoints',
      'collect.logs.rules[1].id: "a" is duplicated; give each rule its own id',
    ]);
  });

  it('requires at least one collector', () => {
    expect(
      problems(
        'collect:\n  logs: {enabled: false}\n  state: {enabled: false}\n  metrics: {enabled: false}\n  events: {enabled: false}\nquery: {rules: [{resources: [pods]}]}\n',
      ),
    ).toEqual([
      'collect: enable at least one of collect.logs, collect.state, collect.metrics, collect.events',
    ]);
  });

  it('derives label_selector from labels, sorted, unless a selector is written', () => {
    const { config } = load(
      'collect:\n  logs:\n    rules:\n      - labels: {b: "2", a: "1"}\n      - labels: {a: "1"}\n        label_selector: app=x\n',
    );
    expect(config.collect.logs.rules.map((rule) => rule.label_selector)).toEqual([
      'a=1,b=2',
      'app=x',
    ]);
  });

  it('adds the default metrics rule only when neither rules nor endpoints are set', () => {
    const withEndpoint = load(
      'collect:\n  metrics:\n    custom_endpoints: [{name: app, url: "http://app:9100/metrics", interval: 15s}]\n',
    ).config.collect.metrics;
    expect(withEndpoint.rules).toEqual([]);
    expect(withEndpoint.custom_endpoints[0]?.interval).toBe(15_000);
  });

  it('cleans exclude_namespaces', () => {
    const { config } = load(
      'collect:\n  logs:\n    exclude_namespaces: [" kube-system ", "", kube-system, a]\n',
    );
    expect(config.collect.logs.exclude_namespaces).toEqual(['kube-system', 'a']);
  });
});

describe('gateway', () => {
  it('refuses reconnect_max_delay shorter than reconnect_initial_delay', () => {
    expect(
      problems('gateway:\n  reconnect_initial_delay: 10s\n  reconnect_max_delay: 5s\n'),
    ).toEqual([
      'gateway.reconnect_max_delay: must not be shorter than gateway.reconnect_initial_delay',
    ]);
  });

  it('warns about insecure_skip_verify with and without TLS', () => {
    expect(load('gateway: {insecure_skip_verify: true}\n').warnings).toEqual([
      "gateway.insecure_skip_verify: the gateway's certificate is not verified; use this only against a development gateway",
    ]);
    expect(load('gateway: {insecure_skip_verify: true, tls: false}\n').warnings).toEqual([
      'gateway.insecure_skip_verify: has no effect while gateway.tls is false',
    ]);
  });
});
