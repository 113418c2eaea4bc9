import { describe, expect, it } from 'vitest';
import { durationPattern, type DurationRange } from './duration-pattern.js';

// An independent reading of the canonical form (duration-pattern.ts explains it), in whole
// nanoseconds with BigInt, so the pattern is checked against arithmetic rather than against
// another regular expression.
const UNITS = [
  { names: ['h'], ns: 3_600_000_000_000n, digits: 9, below: undefined },
  { names: ['m'], ns: 60_000_000_000n, digits: 9, below: 60n },
  { names: ['s'], ns: 1_000_000_000n, digits: 9, below: 60n },
  { names: ['ms'], ns: 1_000_000n, digits: 6, below: 1000n },
  { names: ['us', 'µs', 'μs'], ns: 1000n, digits: 3, below: 1000n },
  { names: ['ns'], ns: 1n, digits: 0, below: 1000n },
] as const;
const COMPONENT = /^([0-9]*)(\.[0-9]*)?(ns|us|µs|μs|ms|h|m|s)/;

function referenceAccepts(text: string, range: DurationRange): boolean {
  const maxNs = BigInt(range.max.slice(0, -1)) * UNITS[0].ns;
  const rest = text.startsWith('+') ? text.slice(1) : text;
  if (rest === '0') return !range.positive;
  let remaining = rest;
  let lastUnit = -1;
  let total = 0n;
  const components: { value: bigint; whole: bigint; unit: number; fraction: boolean }[] = [];
  while (remaining !== '') {
    const match = COMPONENT.exec(remaining);
    if (match === null) return false;
    const [all, whole = '', dotted, name = ''] = match;
    const fractionDigits = dotted === undefined ? '' : dotted.slice(1);
    if (whole === '' && fractionDigits === '') return false;
    const unit = UNITS.findIndex((candidate) =>
      (candidate.names as readonly string[]).includes(name),
    );
    if (unit <= lastUnit) return false;
    const spec = UNITS[unit]!;
    const significant = fractionDigits.replace(/0+$/, '');
    if (significant.length > spec.digits) return false;
    const fractionNs =
      significant === '' ? 0n : (BigInt(significant) * spec.ns) / 10n ** BigInt(significant.length);
    const wholeValue = whole === '' ? 0n : BigInt(whole);
    const value = wholeValue * spec.ns + fractionNs;
    components.push({ value, whole: wholeValue, unit, fraction: dotted !== undefined });
    total += value;
    lastUnit = unit;
    remaining = remaining.slice(all.length);
  }
  if (components.some((component, index) => component.fraction && index < components.length - 1))
    return false;
  const [first, ...later] = components;
  if (first === undefined) return false;
  if (later.some(({ unit, whole }) => whole >= (UNITS[unit]!.below ?? 0n))) return false;
  if (first.value === 0n && total !== 0n) return false;
  if (range.positive && total === 0n) return false;
  return total <= maxNs;
}

/** Deterministic pseudo-random numbers (mulberry32), so a failure reproduces. */
function random(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

const WHOLES = [
  '',
  '0',
  '00',
  '1',
  '01',
  '23',
  '24',
  '25',
  '59',
  '60',
  '61',
  '999',
  '1000',
  '1439',
  '1440',
  '1441',
  '3599',
  '3600',
  '3601',
  '86399',
  '86400',
  '86401',
  '3600000',
  '86400000',
  '86400001',
  '3600000000000',
  '86400000000000',
  '86400000000001',
];
const FRACTIONS = [
  '',
  '',
  '',
  '.',
  '.0',
  '.5',
  '.50',
  '.000000001',
  '.0000000010',
  '.0000000001',
  '.000001',
  '.0000001',
  '.001',
  '.0001',
  '.999999999',
];
const NAMES = ['h', 'm', 's', 'ms', 'us', 'µs', 'μs', 'ns'];

function generate(next: () => number): string {
  const pick = <T>(list: readonly T[]): T => list[Math.floor(next() * list.length)]!;
  const count = 1 + Math.floor(next() * 3);
  let text = next() < 0.05 ? '+' : next() < 0.03 ? '-' : '';
  for (let index = 0; index < count; index += 1)
    text += pick(WHOLES) + pick(FRACTIONS) + pick(NAMES);
  return text;
}

const RANGES: readonly DurationRange[] = [
  { positive: true, max: '24h' },
  { positive: false, max: '24h' },
  { positive: true, max: '1h' },
];

describe.each(RANGES)('durationPattern(positive: $positive, max: $max)', (range) => {
  const pattern = new RegExp(durationPattern(range));

  it('accepts exactly what whole-nanosecond arithmetic accepts, over 30000 generated spellings', () => {
    const next = random(range.max.length * 7 + (range.positive ? 1 : 0));
    const disagreements: string[] = [];
    for (let trial = 0; trial < 30_000; trial += 1) {
      const text = generate(next);
      if (pattern.test(text) !== referenceAccepts(text, range)) disagreements.push(text);
    }
    expect(disagreements.slice(0, 20)).toEqual([]);
  });

  it.each([
    '0',
    '0s',
    '1ns',
    '1s',
    '1m30s',
    '1h0m0s',
    '0.5s',
    '.5s',
    '1.5ms',
    '1µs',
    '1μs',
    '+5s',
    '1h1s',
    '1h1h',
    '1m90s',
    '0h30m',
    '1.5h30m',
    '-5s',
    '30',
    '1d',
    '1.0000000001s',
  ])('agrees with arithmetic on %j', (text) => {
    expect(pattern.test(text)).toBe(referenceAccepts(text, range));
  });

  it('takes the bound itself and refuses a nanosecond more, in every unit', () => {
    const maxHours = Number(range.max.slice(0, -1));
    const spellings = [
      `${maxHours}h`,
      `${maxHours * 60}m`,
      `${maxHours * 3600}s`,
      `${maxHours * 3_600_000}ms`,
      `${maxHours * 3_600_000_000}us`,
      `${maxHours * 3_600_000_000_000}ns`,
    ];
    for (const text of spellings) expect(pattern.test(text), text).toBe(true);
    const over = [
      `${maxHours}h1ns`,
      `${maxHours * 3600}.000000001s`,
      `${maxHours * 3_600_000_000_000 + 1}ns`,
    ];
    for (const text of over) expect(pattern.test(text), text).toBe(false);
  });
});

describe('durationPattern bounds', () => {
  it('refuses a bound that is not a whole number of hours', () => {
    expect(() => durationPattern({ positive: true, max: '90m' })).toThrow(/whole number of hours/);
  });
});
