// The README's benchmark table is generated from bench/results/*.json: it must be exactly what
// `npm run bench:readme` writes, so a figure typed by hand (or left behind) fails the build.
import { describe, expect, it } from 'vitest';
import { expectedReadme } from './report.js';

describe('README benchmark table', () => {
  it('is the one generated from bench/results (npm run bench:readme)', () => {
    const { current, expected } = expectedReadme();
    expect(current).toBe(expected);
  });
});
