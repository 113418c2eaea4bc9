// The Helm chart's values.schema.json, derived from the config schema so chart values and agent
// config cannot drift, and the mapping from chart values back to the config file.
//
// Mapping between chart values and the config file (what the chart's ConfigMap template does):
//   - Every key outside a rule list is the camelCase form of the config key:
//     collect.logs.tail_lines <-> collect.logs.tailLines, buffer.max_memory_bytes <->
//     buffer.maxMemoryBytes, exec.pod.resume_window_sec <-> exec.pod.resumeWindowSec.
//   - A list whose entries are objects is a rule list (collect.logs.rules, collect.state.rules,
//     collect.metrics.rules, collect.metrics.customEndpoints, query.rules, mutate.rules,
//     exec.pod.rules): the list's own key is camelCase, but its entries are copied verbatim, so
//     keys inside an entry stay snake_case (pod_names, label_selector), as the seed documents.
//   - A duration outside a rule list may be given as the number 0 (helm --set turns "0" into a
//     number); the chart writes it quoted, so the agent reads the string "0". Any other number is
//     refused by the schema. Inside a rule list nothing is quoted, so only strings are accepted.
//   - Secrets (agent.tenant_token) are not chart values at all: the token reaches the agent from
//     a Secret through KUBEXA_TENANT_TOKEN.
//   - Chart-only keys (image, rbac, secret, gateway.host, ...) are supplied by the chart and are
//     not part of the config; valuesToConfig ignores them.
import * as z from 'zod';
import { CANONICAL_DURATION_RULES } from './duration-pattern.js';
import type { DurationSpec } from './schema-markers.js';
import { ConfigSchema } from './schema.js';
import { describeSchema, isPlainObject, type AnySchema } from './schema-walk.js';

/** A JSON Schema (draft-07) object. */
export type JsonSchema = Record<string, unknown>;

const DRAFT_07 = 'http://json-schema.org/draft-07/schema#';
/** Types a free-form string position accepts: a YAML number there is read as its text. */
const SCALAR_TYPES = ['string', 'number', 'boolean'];

/** `tail_lines` -> `tailLines`. */
export function toCamelCase(key: string): string {
  return key.replace(/_([a-z0-9])/g, (_match, letter: string) => letter.toUpperCase());
}

function isSecret(schema: AnySchema): boolean {
  const node = describeSchema(schema);
  return node.kind === 'string' && node.mark === 'secret';
}

/** `json` that also accepts null (a blank entry or field, which the agent reads as unset). */
function nullable(json: JsonSchema): JsonSchema {
  const type = json['type'];
  const types = Array.isArray(type) ? [...(type as unknown[])] : type === undefined ? [] : [type];
  const out: JsonSchema = { ...json };
  if (types.length > 0 && !types.includes('null')) out['type'] = [...types, 'null'];
  const values = json['enum'];
  if (Array.isArray(values) && !values.includes(null))
    out['enum'] = [...(values as unknown[]), null];
  return out;
}

/**
 * zod's own JSON Schema for a scalar. The safe-integer bounds zod gives every integer stay: the
 * agent refuses 1e20 where JSON Schema's "integer" alone would take it.
 */
function scalarJson(schema: AnySchema): JsonSchema {
  const json: JsonSchema = z.toJSONSchema(schema, {
    target: 'draft-07',
    io: 'input',
    unrepresentable: 'any',
  });
  delete json['$schema'];
  return json;
}

/** What helm users read in the schema: the range, the form, and that a bare number is refused. */
function durationDescription(spec: DurationSpec, inRuleList: boolean): string {
  const range = spec.positive ? `longer than 0 and at most ${spec.max}` : `at most ${spec.max}`;
  const zero = spec.positive
    ? ''
    : inRuleList
      ? ' Zero is written "0" (quoted).'
      : ' Zero may be written 0 (the chart quotes it).';
  return `A duration string such as 30s, 1m30s or 500ms, ${range}: write 30s, not the number 30.${zero} Written as Go writes durations: ${CANONICAL_DURATION_RULES}.`;
}

function objectJson(shape: Readonly<Record<string, AnySchema>>, inRuleList: boolean): JsonSchema {
  const properties: Record<string, JsonSchema> = {};
  const required: string[] = [];
  for (const [key, child] of Object.entries(shape)) {
    if (isSecret(child)) continue;
    const valueKey = inRuleList ? key : toCamelCase(key);
    // A rule entry's key whose default the agent refuses (resources: [] is "list at least one")
    // must be written, and not blank: the loader reads null as unset.
    if (inRuleList && !z.safeParse(child, undefined).success) {
      required.push(valueKey);
      properties[valueKey] = toJson(child, false);
    } else {
      properties[valueKey] = toJson(child, inRuleList);
    }
  }
  return {
    type: inRuleList ? ['object', 'null'] : 'object',
    additionalProperties: false,
    ...(required.length > 0 ? { required } : {}),
    properties,
  };
}

function durationJson(spec: DurationSpec, inRuleList: boolean): JsonSchema {
  const description = durationDescription(spec, inRuleList);
  if (inRuleList) return { type: ['string', 'null'], pattern: spec.pattern, description };
  // A key that refuses zero takes strings only. Elsewhere integer 0 passes the bounds (the chart
  // quotes it, helm --set turns "0" into a number); any other number fails "maximum".
  return spec.positive
    ? { type: 'string', pattern: spec.pattern, description }
    : { type: ['string', 'integer'], pattern: spec.pattern, minimum: 0, maximum: 0, description };
}

/** Whole numbers JavaScript prints as plain digits, the text the agent reads for them. */
const PLAIN_DIGITS_MAX = 1e20;

/**
 * A string position. The agent reads a YAML number or boolean there as its text, but JSON Schema
 * applies "pattern" to strings only: a formatted position (a name, an address) takes the numbers
 * and booleans whose text its pattern accepts, and nothing else.
 */
function stringJson(scalar: JsonSchema): JsonSchema {
  const pattern = scalar['pattern'];
  if (typeof pattern !== 'string') return { ...scalar, type: SCALAR_TYPES };
  const accepts = (text: string) => new RegExp(pattern).test(text);
  const digits = accepts('0') && accepts(String(PLAIN_DIGITS_MAX));
  const words = accepts('true') && accepts('false');
  if (!digits) return { ...scalar, type: words ? ['string', 'boolean'] : 'string' };
  return {
    ...scalar,
    type: words ? ['string', 'integer', 'boolean'] : ['string', 'integer'],
    minimum: 0,
    maximum: PLAIN_DIGITS_MAX,
  };
}

/** The schema of one position; inside a rule list a blank (null) is accepted everywhere. */
function toJson(schema: AnySchema, inRuleList: boolean): JsonSchema {
  const node = describeSchema(schema);
  let json: JsonSchema;
  switch (node.kind) {
    case 'object':
      return objectJson(node.shape, inRuleList);
    case 'duration':
      return durationJson(node.spec, inRuleList);
    case 'array': {
      const isRuleList = inRuleList || describeSchema(node.element).kind === 'object';
      json = { type: 'array', items: nullable(toJson(node.element, isRuleList)) };
      break;
    }
    case 'record':
      json = { type: 'object', additionalProperties: nullable(toJson(node.value, inRuleList)) };
      break;
    case 'string':
      json = stringJson(scalarJson(node.schema));
      break;
    case 'leaf':
      json = scalarJson(node.schema);
      break;
  }
  return inRuleList ? nullable(json) : json;
}

function mergeChartOnly(
  properties: Record<string, JsonSchema>,
  chartOnly: Readonly<Record<string, JsonSchema>>,
): Record<string, JsonSchema> {
  const merged = { ...properties };
  for (const [key, extra] of Object.entries(chartOnly)) {
    const generated = merged[key];
    if (generated === undefined) {
      merged[key] = extra;
      continue;
    }
    // A config block may carry chart-only keys too (gateway.host, gateway.port).
    const extraProperties = extra['properties'];
    const generatedProperties = generated['properties'];
    if (!isPlainObject(extraProperties) || !isPlainObject(generatedProperties)) {
      throw new Error(
        `chart-only property "${key}" collides with a config section; give it only "properties" to add keys to that section`,
      );
    }
    for (const inner of Object.keys(extraProperties)) {
      if (Object.hasOwn(generatedProperties, inner)) {
        throw new Error(`chart-only property "${key}.${inner}" is already a config key`);
      }
    }
    merged[key] = { ...generated, properties: { ...generatedProperties, ...extraProperties } };
  }
  return merged;
}

/**
 * The chart's values.schema.json: config keys (camelCase, rule lists verbatim) plus the chart's
 * own keys, closed (additionalProperties: false) at every level. `chartOnlyProperties` are JSON
 * Schema properties keyed by top-level value name; one named like a config section (gateway)
 * adds its `properties` to that section.
 */
export function valuesSchemaForConfig(
  chartOnlyProperties: Readonly<Record<string, JsonSchema>>,
): JsonSchema {
  const config = toJson(ConfigSchema, false);
  const properties = config['properties'] as Record<string, JsonSchema>;
  return {
    $schema: DRAFT_07,
    title: 'kubexa-agent chart values (generated from shared/config/schema.ts; do not edit)',
    type: 'object',
    additionalProperties: false,
    properties: mergeChartOnly(properties, chartOnlyProperties),
  };
}

function objectFromValues(
  value: Record<string, unknown>,
  shape: Readonly<Record<string, AnySchema>>,
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, child] of Object.entries(shape)) {
    const given = value[toCamelCase(key)];
    if (given === undefined || given === null || isSecret(child)) continue;
    out[key] = fromValues(given, child);
  }
  return out;
}

function fromValues(value: unknown, schema: AnySchema): unknown {
  const node = describeSchema(schema);
  switch (node.kind) {
    case 'object':
      return isPlainObject(value) ? objectFromValues(value, node.shape) : value;
    case 'array':
    case 'record':
      // Rule lists and label maps pass through verbatim.
      return structuredClone(value);
    case 'duration':
      return typeof value === 'number' ? String(value) : value;
    case 'string':
      return typeof value === 'number' || typeof value === 'boolean' ? String(value) : value;
    case 'leaf':
      return value;
  }
}

/**
 * The config file the chart should render for `values` (camelCase chart values), before the
 * chart's own derivations (gateway.address from gateway.host/port) and without the token, which
 * travels by env. Compare by loading both through loadConfig.
 */
export function valuesToConfig(values: unknown): Record<string, unknown> {
  const config = fromValues(values, ConfigSchema);
  return isPlainObject(config) ? config : {};
}
