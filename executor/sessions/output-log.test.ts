import { describe, expect, it } from 'vitest';
import { OutputLog } from './output-log.js';

describe('OutputLog', () => {
  it('numbers output from 1, splits large writes, and replays what follows a sequence number', () => {
    const log = new OutputLog(100, 4);
    const added = log.append(1, Buffer.from('abcdefghij'));
    expect(added.map((c) => [c.seq, c.data.toString()])).toEqual([
      [1, 'abcd'],
      [2, 'efgh'],
      [3, 'ij'],
    ]);
    log.append(2, Buffer.from('x'));
    expect(log.after(2).map((c) => c.seq)).toEqual([3, 4]);
    expect(log.after(2)[1]?.stream).toBe(2);
  });

  it('forgets acknowledged output and reports the window full, then drained below half', () => {
    const log = new OutputLog(10, 5);
    log.append(1, Buffer.alloc(10));
    expect(log.full()).toBe(true);
    expect(log.drained()).toBe(false);
    log.ack(1);
    expect(log.bytes()).toBe(5);
    expect(log.drained()).toBe(false);
    log.ack(2);
    expect(log.bytes()).toBe(0);
    expect(log.drained()).toBe(true);
    expect(log.after(0)).toEqual([]);
  });

  it('clamps an ack beyond the last sequence number and ignores an older one', () => {
    const log = new OutputLog(100, 10);
    log.append(1, Buffer.from('a'));
    log.ack(99);
    expect(log.acked()).toBe(1);
    log.append(1, Buffer.from('b'));
    log.ack(0);
    expect(log.after(0).map((c) => c.seq)).toEqual([2]);
  });
});
