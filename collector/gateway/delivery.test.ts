import { describe, expect, it } from 'vitest';
import { AttemptLedger, SESSION_ENDS_BEFORE_QUARANTINE, isItemFault } from './delivery.js';

describe('AttemptLedger.sessionEnded', () => {
  it('never charges or quarantines an item for transport losses, however many', () => {
    const ledger = new AttemptLedger();
    const reasons = [
      'UNAVAILABLE: Connection dropped',
      'CANCELLED: Call cancelled',
      'DEADLINE_EXCEEDED: Deadline exceeded',
      'the gateway ended the stream',
    ];
    for (let round = 0; round < 5; round++) {
      for (const reason of reasons) {
        expect(ledger.sessionEnded('head', { alone: true, reason })).toEqual({ kind: 'suspect' });
      }
    }
    expect(ledger.charges('head')).toBe(0);
    // Still sent alone next time, so that a real culprit names itself.
    expect(ledger.isSuspect('head')).toBe(true);
  });

  it('quarantines an item that ends sessions with refusals it could have caused', () => {
    const ledger = new AttemptLedger();
    const reason = 'UNKNOWN: handler threw';
    for (let end = 1; end < SESSION_ENDS_BEFORE_QUARANTINE; end++) {
      expect(ledger.sessionEnded('bad', { alone: false, reason })).toEqual({
        kind: 'charged',
        sessionEnds: end,
      });
    }
    expect(ledger.sessionEnded('bad', { alone: false, reason }).kind).toBe('quarantine');
    expect(ledger.charges('bad')).toBe(SESSION_ENDS_BEFORE_QUARANTINE);
  });

  it('quarantines at once an item that, alone in flight, the gateway could not decode', () => {
    const ledger = new AttemptLedger();
    const verdict = ledger.sessionEnded('garbled', {
      alone: true,
      reason: 'INTERNAL: Error deserializing request: invalid wire type',
    });
    expect(verdict.kind).toBe('quarantine');
  });

  it('tells item faults from transport losses by the status name', () => {
    expect(isItemFault('INTERNAL: Error deserializing request')).toBe(true);
    expect(isItemFault('INVALID_ARGUMENT: bad')).toBe(true);
    expect(isItemFault('UNAVAILABLE: No connection established')).toBe(false);
    expect(isItemFault('connection reset')).toBe(false);
  });
});
