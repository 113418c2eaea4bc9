// Wording for zod's generic issues, used as the per-parse error map. Fields with a message of
// their own (durations, byte sizes, patterns) keep theirs. No message repeats the value it
// refuses: the value at a path may be a secret.
import type * as z from 'zod';
import { describeType } from './fields.js';

const EXPECTED: Readonly<Record<string, string>> = {
  boolean: 'true or false',
  int: 'a whole number',
  // Every number in the config is a whole number (zod reports z.int() as expecting "number").
  number: 'a whole number',
  string: 'a string',
  array: 'a list',
  object: 'a mapping',
  record: 'a mapping',
};

function describeInvalidType(issue: z.core.$ZodRawIssue<z.core.$ZodIssueInvalidType>): string {
  const expected = EXPECTED[issue.expected] ?? issue.expected;
  const hint =
    issue.expected === 'boolean' && typeof issue.input === 'string'
      ? ' (write it without quotes)'
      : '';
  return `expected ${expected}, got ${describeType(issue.input)}${hint}`;
}

function describeBound(kind: 'at least' | 'at most', origin: string, bound: unknown): string {
  if (origin === 'array')
    return kind === 'at least'
      ? `list at least ${String(bound)} entries`
      : `list at most ${String(bound)} entries`;
  if (origin === 'string') return `must be ${kind} ${String(bound)} characters long`;
  return `must be ${kind} ${String(bound)}`;
}

/** The message for a zod issue raised without a field-specific message. */
export function describeIssue(issue: z.core.$ZodRawIssue): string | undefined {
  switch (issue.code) {
    case 'invalid_type':
      return describeInvalidType(issue);
    case 'too_small':
      return describeBound('at least', issue.origin, issue.minimum);
    case 'too_big':
      return describeBound('at most', issue.origin, issue.maximum);
    case 'invalid_value':
      return `must be one of: ${issue.values.map(String).join(', ')}`;
    case 'invalid_format':
      return 'has an unsupported format';
    case 'custom':
    case 'invalid_element':
    case 'invalid_key':
    case 'invalid_union':
    case 'not_multiple_of':
    case 'unrecognized_keys':
      return undefined; // zod's wording, or the schema's own message
  }
}
