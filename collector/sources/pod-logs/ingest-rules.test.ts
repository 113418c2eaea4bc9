import { describe, expect, it } from 'vitest';
import { DEFAULT_INGEST_LIMITS } from './container-log.js';
import { applyIngestRules } from './ingest-rules.js';

const rules = (fields: Partial<Record<string, string>>) => ({
  maxLineBytes: '0',
  maxSampleAgeMs: '0',
  maxFutureSkewMs: '0',
  perStreamRateBytes: '0',
  perStreamBurstBytes: '0',
  ...fields,
});

describe('applyIngestRules', () => {
  it('changes nothing when the update carries no ingest rules', () => {
    expect(applyIngestRules(DEFAULT_INGEST_LIMITS, undefined)).toBe(DEFAULT_INGEST_LIMITS);
  });

  it('applies pushed fields and keeps the others (0 means not pushed)', () => {
    const next = applyIngestRules(
      DEFAULT_INGEST_LIMITS,
      rules({ maxLineBytes: '1024', perStreamRateBytes: '4096', perStreamBurstBytes: '8192' }),
    );
    expect(next).toEqual({
      maxLineBytes: 1024,
      maxSampleAgeMs: 0,
      maxFutureSkewMs: 0,
      rate: { ratePerSecond: 4096, burst: 8192 },
    });
    const later = applyIngestRules(next, rules({ maxSampleAgeMs: '604800000' }));
    expect(later).toEqual({ ...next, maxSampleAgeMs: 604_800_000 });
  });

  it('ignores values that are not positive numbers', () => {
    expect(applyIngestRules(DEFAULT_INGEST_LIMITS, rules({ maxLineBytes: '-5' }))).toEqual(
      DEFAULT_INGEST_LIMITS,
    );
  });
});
