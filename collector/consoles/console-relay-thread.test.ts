// The refusal the main thread sends for a console its relay thread cannot take: after the gateway
// session the dial belongs to has ended, grpc-js throws at once ("Channel has been shut down").
// Called from a worker's event listeners, a throw there would end the collector.
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import type { ConsoleCall } from '../gateway/dial.js';
import { refuse } from './console-relay-thread.js';

describe('refuse', () => {
  it('logs instead of throwing when the dial of an ended session throws', () => {
    const lines: string[] = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => lines.push(line) });
    const ended = (): ConsoleCall => {
      throw new Error('Channel has been shut down');
    };
    expect(() => {
      refuse('r-1', ended, 'the collector is stopping', logger);
    }).not.toThrow();
    expect(lines.join('')).toContain('could not refuse a console on its call');
    expect(lines.join('')).toContain('Channel has been shut down');
  });
});
