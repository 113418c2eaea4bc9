import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { configKeyPaths } from './config-keys.js';

describe('docs/configuration.md', () => {
  it('documents every config key, and no key that does not exist', () => {
    const doc = readFileSync(new URL('../../docs/configuration.md', import.meta.url), 'utf8');
    // First cell of every table row that names a key (Prettier pads the cells).
    const documented = new Set(
      [...doc.matchAll(/^\|\s*`([a-z_.[\]]+)`\s*\|/gm)].map((match) => match[1] ?? ''),
    );
    const keys = configKeyPaths();
    expect(keys.filter((key) => !documented.has(key))).toEqual([]);
    const known = new Set(keys);
    expect([...documented].filter((key) => key.includes('.') && !known.has(key))).toEqual([]);
  });
});
