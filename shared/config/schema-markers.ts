// Marks that give a field of the config schema a meaning zod's own types cannot express. The
// loader, the values-schema generator and maskSecrets all read them, so a field is declared a
// duration or a secret once, in schema.ts, and every consumer follows.
import type * as z from 'zod';

/** `duration`: a Go duration string in the file, milliseconds in Config. */
/** `secret`: never printed, never in values.schema.json (it reaches the agent through env only). */
/** `credential-url`: a URL whose user-info part (user:password@) is masked when printed. */
export type FieldMark = 'duration' | 'secret' | 'credential-url';

const marks = new WeakMap<z.core.$ZodType, FieldMark>();

/** Returns `schema` after recording `mark` for it. */
export function markField<T extends z.core.$ZodType>(schema: T, mark: FieldMark): T {
  marks.set(schema, mark);
  return schema;
}

/** The mark recorded for exactly this schema instance, if any. */
export function fieldMarkOf(schema: z.core.$ZodType): FieldMark | undefined {
  return marks.get(schema);
}

/** What a duration field accepts: the values schema copies it, the agreement test reads it. */
export interface DurationSpec {
  /** The anchored pattern of every accepted spelling (duration-pattern.ts). */
  readonly pattern: string;
  readonly positive: boolean;
  /** The longest accepted duration, as the file writes it. */
  readonly max: string;
}

const durationSpecs = new WeakMap<z.core.$ZodType, DurationSpec>();

/** Returns `schema` marked as a duration with `spec`. */
export function markDuration<T extends z.core.$ZodType>(schema: T, spec: DurationSpec): T {
  durationSpecs.set(schema, spec);
  return markField(schema, 'duration');
}

/** The spec recorded for exactly this schema instance, if it is a duration field. */
export function durationSpecOf(schema: z.core.$ZodType): DurationSpec | undefined {
  return durationSpecs.get(schema);
}
