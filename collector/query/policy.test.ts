import { describe, expect, it } from 'vitest';
import { load } from '../../shared/config/load-for-test.js';
import { andSelectors, compileQueryPolicy, type GroupVersionResource } from './policy.js';

const PODS: GroupVersionResource = { group: '', version: 'v1', resource: 'pods' };
const SECRETS: GroupVersionResource = { group: '', version: 'v1', resource: 'secrets' };
const DEPLOYMENTS: GroupVersionResource = { group: 'apps', version: 'v1', resource: 'deployments' };

function policyOf(yaml: string) {
  return compileQueryPolicy(load(yaml).config.query);
}

describe('query policy', () => {
  it('inherits collect.state rules (no verb restriction) when query.rules is empty', () => {
    const policy = policyOf(
      'collect: {state: {rules: [{id: s, namespace: shop, resources: [pods]}]}}',
    );
    expect(policy.decide(PODS, 'get', 'shop', 'web-1')).toMatchObject({
      allowed: true,
      ruleId: 's',
    });
    expect(policy.decide(PODS, 'list', 'shop', '')).toMatchObject({ allowed: true });
    expect(policy.decide(PODS, 'list', 'other', '').allowed).toBe(false);
    expect(policy.decide(SECRETS, 'list', 'shop', '').allowed).toBe(false);
  });

  it('inherits redact_secrets per field', () => {
    expect(policyOf('collect: {state: {redact_secrets: true}}').redactSecrets).toBe(true);
    expect(
      policyOf('collect: {state: {redact_secrets: true}}\nquery: {redact_secrets: false}')
        .redactSecrets,
    ).toBe(false);
  });

  it('lets the first matching rule win, with its own selectors and names', () => {
    const policy = policyOf(`
query:
  rules:
    - {id: first, namespace: "team-*", resources: [pods], names: ["api-*"], label_selector: tier=web}
    - {id: second, resources: [pods], verbs: [list], field_selector: status.phase=Running}
`);
    expect(policy.decide(PODS, 'list', 'team-a', '')).toMatchObject({
      ruleId: 'first',
      labelSelector: 'tier=web',
    });
    // get of a name outside the first rule's names falls through; the second rule is list only.
    expect(policy.decide(PODS, 'get', 'team-a', 'db-0').allowed).toBe(false);
    expect(policy.decide(PODS, 'get', 'team-a', 'api-0')).toMatchObject({ ruleId: 'first' });
    // a namespaced rule never matches an all-namespaces list
    expect(policy.decide(PODS, 'list', '', '')).toMatchObject({ ruleId: 'second' });
    expect(policy.decide(PODS, 'list', 'teamb', '')).toMatchObject({ ruleId: 'second' });
  });

  it('matches "*" rules to every well-formed resource and refuses malformed references', () => {
    const policy = policyOf('query: {rules: [{id: all, resources: ["*"]}]}');
    expect(policy.decide(DEPLOYMENTS, 'list', '', '')).toMatchObject({ wildcard: true });
    expect(
      policy.decide(
        { group: 'example.com', version: 'v1alpha1', resource: 'widgets' },
        'get',
        'a',
        'w',
      ).allowed,
    ).toBe(true);
    for (const ref of [
      { group: '', version: 'v1', resource: './secrets' },
      { group: '', version: 'v1', resource: 'SECRETS' },
      { group: 'x', version: '..', resource: 'secrets' },
      { group: 'x/..', version: 'v1', resource: 'secrets' },
      { group: '', version: 'v1', resource: 'secrets/' },
      { group: '', version: 'v1', resource: '' },
      { group: 'bad/group', version: 'v1', resource: 'pods' },
      { group: '', version: '../v1', resource: 'pods' },
    ]) {
      const decision = policy.decide(ref, 'list', '', '');
      expect(decision.allowed, JSON.stringify(ref)).toBe(false);
      expect(decision.allowed ? '' : decision.reason).toContain('invalid resource reference');
    }
    expect(policy.decide(PODS, 'get', 'a', '..')).toMatchObject({ allowed: false });
    expect(policy.decide(PODS, 'get', '../kube-system', 'x')).toMatchObject({ allowed: false });
  });

  it('refuses everything with a reason when disabled', () => {
    const policy = policyOf('query: {enabled: false, rules: [{resources: ["*"]}]}');
    const decision = policy.decide(PODS, 'list', '', '');
    expect(decision.allowed ? '' : decision.reason).toContain('query.enabled: false');
    expect(policy.allowsAny(PODS, 'list')).toBe(false);
  });

  it('answers the coarse catalog verdict per verb', () => {
    const policy = policyOf(
      'query: {rules: [{namespace: a, resources: [secrets], verbs: [list]}]}',
    );
    expect(policy.allowsAny(SECRETS, 'list')).toBe(true);
    expect(policy.allowsAny(SECRETS, 'get')).toBe(false);
    expect(policy.allowsAny(PODS, 'list')).toBe(false);
  });

  it('ANDs selectors', () => {
    expect(andSelectors('a=b', 'c=d')).toBe('a=b,c=d');
    expect(andSelectors(' ', 'c=d')).toBe('c=d');
    expect(andSelectors('a=b', '')).toBe('a=b');
  });
});
