import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { compileEligibility, type EligibilityConfig, type LogRuleConfig } from './eligibility.js';

const running = { running: { startedAt: new Date(0) } };

function pod(overrides: {
  name?: string;
  namespace?: string;
  labels?: Record<string, string>;
  phase?: string;
  deleting?: boolean;
  containers?: Record<string, 'running' | 'crashloop' | 'new'>;
  node?: string;
}): V1Pod {
  const containers = overrides.containers ?? { app: 'running' };
  return {
    metadata: {
      name: overrides.name ?? 'web-1',
      namespace: overrides.namespace ?? 'prod',
      uid: 'u',
      labels: overrides.labels ?? { app: 'web' },
      ...(overrides.deleting ? { deletionTimestamp: new Date(0) } : {}),
    },
    spec: {
      nodeName: overrides.node ?? 'node-a',
      containers: Object.keys(containers).map((name) => ({ name })),
    },
    status: {
      phase: overrides.phase ?? 'Running',
      containerStatuses: Object.entries(containers).map(([name, state]) => ({
        name,
        image: 'i',
        imageID: '',
        ready: true,
        restartCount: state === 'crashloop' ? 3 : 0,
        state:
          state === 'running'
            ? running
            : {
                waiting: {
                  reason: state === 'crashloop' ? 'CrashLoopBackOff' : 'ContainerCreating',
                },
              },
      })),
    },
  };
}

const rule = (fields: Partial<LogRuleConfig>): LogRuleConfig => ({
  id: fields.id ?? 'r',
  namespace: '',
  pod_names: [],
  label_selector: '',
  field_selector: '',
  containers: [],
  ...fields,
});

const config = (rules: LogRuleConfig[], exclude: string[] = []): EligibilityConfig => ({
  tail_lines: 100,
  follow: true,
  exclude_namespaces: exclude,
  rules,
});

describe('eligibility', () => {
  it.each([
    { name: 'default rule matches', rules: [rule({})], pod: pod({}), want: ['app'] },
    { name: 'namespace mismatch', rules: [rule({ namespace: 'dev' })], pod: pod({}), want: [] },
    { name: 'excluded namespace', rules: [rule({})], exclude: ['prod'], pod: pod({}), want: [] },
    {
      name: 'label selector',
      rules: [rule({ label_selector: 'app=web' })],
      pod: pod({}),
      want: ['app'],
    },
    {
      name: 'label selector miss',
      rules: [rule({ label_selector: 'app in (api,db)' })],
      pod: pod({}),
      want: [],
    },
    {
      name: 'label notin',
      rules: [rule({ label_selector: 'app notin (api), !canary' })],
      pod: pod({}),
      want: ['app'],
    },
    { name: 'pod name glob', rules: [rule({ pod_names: ['web-*'] })], pod: pod({}), want: ['app'] },
    {
      name: 'pod name glob miss',
      rules: [rule({ pod_names: ['api-*', ' '] })],
      pod: pod({}),
      want: [],
    },
    {
      name: 'container globs',
      rules: [rule({ containers: ['side*'] })],
      pod: pod({ containers: { app: 'running', sidecar: 'running', 'side-b': 'running' } }),
      want: ['sidecar', 'side-b'],
    },
    {
      name: 'field selector',
      rules: [rule({ field_selector: 'spec.nodeName=node-a' })],
      pod: pod({}),
      want: ['app'],
    },
    {
      name: 'field selector !=',
      rules: [rule({ field_selector: 'spec.nodeName!=node-a' })],
      pod: pod({}),
      want: [],
    },
    { name: 'deleting pod', rules: [rule({})], pod: pod({ deleting: true }), want: [] },
    { name: 'Unknown phase', rules: [rule({})], pod: pod({ phase: 'Unknown' }), want: [] },
    {
      name: 'crash-looping container still streamed',
      rules: [rule({})],
      pod: pod({ containers: { app: 'crashloop' } }),
      want: ['app'],
    },
    {
      name: 'container not started yet',
      rules: [rule({})],
      pod: pod({ containers: { app: 'new' } }),
      want: [],
    },
    {
      name: 'blank rule is no rule',
      rules: [rule({ id: 'blank' }), rule({ namespace: 'dev' })],
      pod: pod({}),
      want: [],
    },
  ])('$name', ({ rules, exclude, pod: p, want }) => {
    const targets = compileEligibility(config(rules, exclude))(p);
    expect(targets.map((t) => t.container)).toEqual(want);
  });

  it('merges overlapping rules: largest tail, follow if any, every rule id', () => {
    const targets = compileEligibility(
      config([
        rule({ id: 'a', tail_lines: 10, follow: false }),
        rule({ id: 'b', namespace: 'prod', tail_lines: 500, follow: true }),
        rule({ id: 'c', namespace: 'prod', tail_lines: 5, follow: false }),
      ]),
    )(pod({}));
    expect(targets).toEqual([
      { container: 'app', tailLines: 500, follow: true, ruleIds: ['a', 'b', 'c'] },
    ]);
  });
});
