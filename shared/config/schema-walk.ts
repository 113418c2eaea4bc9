// Structural view of the config schema, for the code that walks a value alongside it (unknown-key
// warnings, the values-schema generator, valuesToConfig, printing). Wrappers that do not change
// the shape of the data (optional, default, prefault, nullable, readonly, a pipe's input side)
// are looked through, so consumers see the shape of the YAML that is written.
import * as z from 'zod';
import {
  durationSpecOf,
  fieldMarkOf,
  type DurationSpec,
  type FieldMark,
} from './schema-markers.js';

export type AnySchema = z.core.$ZodType;

export type SchemaNode =
  | { readonly kind: 'object'; readonly shape: Readonly<Record<string, AnySchema>> }
  | { readonly kind: 'array'; readonly element: AnySchema }
  | { readonly kind: 'record'; readonly value: AnySchema }
  | { readonly kind: 'duration'; readonly spec: DurationSpec }
  /** A free-form string; YAML numbers and booleans at its position are read as their text. */
  | { readonly kind: 'string'; readonly schema: AnySchema; readonly mark: FieldMark | undefined }
  /** Any other scalar (boolean, integer, enum). */
  | { readonly kind: 'leaf'; readonly schema: AnySchema };

function innerOf(schema: AnySchema): AnySchema | undefined {
  if (
    schema instanceof z.core.$ZodOptional ||
    schema instanceof z.core.$ZodNullable ||
    schema instanceof z.core.$ZodDefault ||
    schema instanceof z.core.$ZodPrefault ||
    schema instanceof z.core.$ZodReadonly
  ) {
    return schema._zod.def.innerType;
  }
  if (schema instanceof z.core.$ZodPipe) return schema._zod.def.in;
  return undefined;
}

/** What kind of value `schema` expects in the file, seen through its wrappers. */
export function describeSchema(schema: AnySchema): SchemaNode {
  let current = schema;
  let mark = fieldMarkOf(current);
  for (let inner = innerOf(current); inner !== undefined; inner = innerOf(current)) {
    if (mark === 'duration') break;
    current = inner;
    mark ??= fieldMarkOf(current);
  }
  if (mark === 'duration') {
    const spec = durationSpecOf(current);
    if (spec === undefined) throw new Error('a duration field must be built by durationField()');
    return { kind: 'duration', spec };
  }
  if (current instanceof z.core.$ZodObject)
    return { kind: 'object', shape: current._zod.def.shape };
  if (current instanceof z.core.$ZodArray)
    return { kind: 'array', element: current._zod.def.element };
  if (current instanceof z.core.$ZodRecord) {
    return { kind: 'record', value: current._zod.def.valueType };
  }
  if (current instanceof z.core.$ZodString) return { kind: 'string', schema: current, mark };
  return { kind: 'leaf', schema: current };
}

/** A plain mapping as YAML produces it (not an array, not null). */
export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** `collect.logs.rules[0].tail_lines` from its segments. */
export function formatPath(segments: readonly PropertyKey[]): string {
  let text = '';
  for (const segment of segments) {
    if (typeof segment === 'number') text += `[${segment}]`;
    else text += text === '' ? String(segment) : `.${String(segment)}`;
  }
  return text;
}
