import { describe, expect, it } from 'vitest';
import { allowingRule, matchesPattern } from './pod-console-policy.js';

describe('exec.pod.rules', () => {
  it.each([
    ['*', 'anything', true],
    ['web-*', 'web-1', true],
    ['web-*', 'api-1', false],
    ['api', 'api', true],
    ['api', 'api-0', false],
  ])('pattern %s against %s: %s', (pattern, value, expected) => {
    expect(matchesPattern(pattern, value)).toBe(expected);
  });

  const rules = [
    { id: 'no-namespace', namespace: '', names: [], containers: [] },
    { id: 'team-a-web', namespace: 'team-a', names: ['web-*'], containers: ['app'] },
    { id: 'debug-everywhere', namespace: '*', names: ['debug'], containers: [] },
  ];

  it('names the first rule that allows the target', () => {
    expect(allowingRule(rules, { namespace: 'team-a', pod: 'web-0', container: 'app' })).toBe(
      'team-a-web',
    );
    expect(allowingRule(rules, { namespace: 'team-b', pod: 'debug', container: 'x' })).toBe(
      'debug-everywhere',
    );
  });

  it('refuses another container, another pod, another namespace, and never matches a rule without a namespace', () => {
    expect(allowingRule(rules, { namespace: 'team-a', pod: 'web-0', container: 'sidecar' })).toBe(
      undefined,
    );
    expect(allowingRule(rules, { namespace: 'team-a', pod: 'api-0', container: 'app' })).toBe(
      undefined,
    );
    expect(allowingRule(rules, { namespace: 'team-b', pod: 'web-0', container: 'app' })).toBe(
      undefined,
    );
    expect(allowingRule(rules.slice(0, 1), { namespace: 'x', pod: 'y', container: 'z' })).toBe(
      undefined,
    );
  });
});
