import { describe, expect, it } from 'vitest';
import type { ConfigSnapshot } from '../../proto/index.js';
import { applySettingsPatch, type StreamSettings } from './settings.js';

const current = (): StreamSettings => ({
  heartbeatIntervalMs: 30_000,
  batchSize: 100,
  flushIntervalMs: 1000,
});

const snapshot = (fields: Partial<ConfigSnapshot>): ConfigSnapshot => ({
  logCollectors: [],
  watchers: [],
  metricScrapers: [],
  heartbeatIntervalSec: 0,
  batchSize: 0,
  flushIntervalMs: 0,
  ...fields,
});

describe('applySettingsPatch', () => {
  it('applies in-range values as a patch; 0 means unchanged', () => {
    const settings = current();
    const result = applySettingsPatch(
      settings,
      snapshot({ heartbeatIntervalSec: 10, batchSize: 500 }),
    );
    expect(result).toEqual({
      changed: { heartbeatIntervalMs: 10_000, batchSize: 500 },
      clamped: [],
    });
    expect(settings).toEqual({
      heartbeatIntervalMs: 10_000,
      batchSize: 500,
      flushIntervalMs: 1000,
    });
    expect(applySettingsPatch(settings, undefined)).toEqual({ changed: {}, clamped: [] });
  });

  it('clamps a heartbeat interval to at most 1 h: a huge one never becomes a 1 ms timer', () => {
    const settings = current();
    const huge = applySettingsPatch(settings, snapshot({ heartbeatIntervalSec: 2 ** 31 - 1 }));
    expect(settings.heartbeatIntervalMs).toBe(3_600_000);
    expect(huge.clamped).toEqual([
      { setting: 'heartbeatIntervalMs', requested: (2 ** 31 - 1) * 1000, applied: 3_600_000 },
    ]);
  });

  it('honours a 1 s heartbeat, the shortest the wire can ask for, as the Go agent does', () => {
    const settings = current();
    expect(applySettingsPatch(settings, snapshot({ heartbeatIntervalSec: 1 }))).toEqual({
      changed: { heartbeatIntervalMs: 1000 },
      clamped: [],
    });
    expect(settings.heartbeatIntervalMs).toBe(1000);
  });

  it('clamps flush_interval_ms to [100 ms, 1 h]', () => {
    const settings = current();
    expect(applySettingsPatch(settings, snapshot({ flushIntervalMs: 1 })).clamped).toEqual([
      { setting: 'flushIntervalMs', requested: 1, applied: 100 },
    ]);
    expect(settings.flushIntervalMs).toBe(100);
    applySettingsPatch(settings, snapshot({ flushIntervalMs: 2 ** 31 - 1 }));
    expect(settings.flushIntervalMs).toBe(3_600_000);
  });

  it('clamps batch_size to [1, 10000]', () => {
    const settings = current();
    const result = applySettingsPatch(settings, snapshot({ batchSize: 2 ** 31 - 1 }));
    expect(settings.batchSize).toBe(10_000);
    expect(result).toEqual({
      changed: { batchSize: 10_000 },
      clamped: [{ setting: 'batchSize', requested: 2 ** 31 - 1, applied: 10_000 }],
    });
  });

  it('ignores negative values (an int32 on the wire) like 0', () => {
    const settings = current();
    const result = applySettingsPatch(
      settings,
      snapshot({ heartbeatIntervalSec: -1, batchSize: -5, flushIntervalMs: -100 }),
    );
    expect(result).toEqual({ changed: {}, clamped: [] });
    expect(settings).toEqual(current());
  });

  it('reports a clamp even when the clamped value is already in effect', () => {
    const settings = { ...current(), batchSize: 10_000 };
    expect(applySettingsPatch(settings, snapshot({ batchSize: 50_000 }))).toEqual({
      changed: {},
      clamped: [{ setting: 'batchSize', requested: 50_000, applied: 10_000 }],
    });
  });
});
