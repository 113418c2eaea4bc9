// The executor's rule patterns (mutate.node.nodes, mutate.rules names and namespaces): a name,
// a prefix ending in "*", or "*". Anything wider lets a rule reach objects its author never named.
import { describe, expect, it } from 'vitest';
import { matchesAnyNamePattern, matchesNamePattern } from './name-pattern.js';

describe('rule name patterns', () => {
  it('matches a plain name exactly: not a prefix, a suffix or a substring of it', () => {
    expect(matchesNamePattern('web', 'web')).toBe(true);
    expect(matchesNamePattern('web', 'web-0')).toBe(false);
    expect(matchesNamePattern('web', 'my-web')).toBe(false);
    expect(matchesNamePattern('web-0', 'web')).toBe(false);
    expect(matchesNamePattern(' web ', 'web')).toBe(true);
  });

  it('matches a prefix pattern only at the start of the name', () => {
    expect(matchesNamePattern('worker-*', 'worker-1')).toBe(true);
    expect(matchesNamePattern('worker-*', 'worker-')).toBe(true);
    expect(matchesNamePattern('worker-*', 'control-plane')).toBe(false);
    expect(matchesNamePattern('worker-*', 'big-worker-1')).toBe(false);
    expect(matchesNamePattern('worker-*', 'worker')).toBe(false);
  });

  it('matches every name with "*", and nothing with an empty pattern or an empty list', () => {
    expect(matchesNamePattern('*', 'kube-system')).toBe(true);
    expect(matchesNamePattern('', 'kube-system')).toBe(false);
    expect(matchesNamePattern('  ', '')).toBe(false);
    expect(matchesAnyNamePattern([], 'anything')).toBe(false);
    expect(matchesAnyNamePattern(['db-*', 'web'], 'web')).toBe(true);
    expect(matchesAnyNamePattern(['db-*', 'web'], 'cache')).toBe(false);
  });
});
