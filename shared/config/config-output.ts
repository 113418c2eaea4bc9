// Printing a Config: secrets masked, durations back in the file's own syntax, so the output of
// `config check` can be read as, and pasted into, a config file.
import { formatDuration } from './duration.js';
import { ConfigSchema, type Config } from './schema.js';
import type { FieldMark } from './schema-markers.js';
import { describeSchema, isPlainObject, type AnySchema } from './schema-walk.js';

/** Stands in for a secret's value wherever a config is printed. */
export const REDACTED = '[redacted]';

type LeafMapper = (
  value: unknown,
  kind: 'duration' | 'string' | 'leaf',
  mark?: FieldMark,
) => unknown;

function mapLeaves(value: unknown, schema: AnySchema, mapLeaf: LeafMapper): unknown {
  const node = describeSchema(schema);
  switch (node.kind) {
    case 'object': {
      if (!isPlainObject(value)) return value;
      const out: Record<string, unknown> = {};
      for (const [key, child] of Object.entries(value)) {
        const childSchema = node.shape[key];
        out[key] = childSchema === undefined ? child : mapLeaves(child, childSchema, mapLeaf);
      }
      return out;
    }
    case 'array':
      return Array.isArray(value)
        ? value.map((item) => mapLeaves(item, node.element, mapLeaf))
        : value;
    case 'record':
      return isPlainObject(value)
        ? Object.fromEntries(
            Object.entries(value).map(([key, child]) => [
              key,
              mapLeaves(child, node.value, mapLeaf),
            ]),
          )
        : value;
    case 'duration':
      return mapLeaf(value, 'duration');
    case 'string':
      return mapLeaf(value, 'string', node.mark);
    case 'leaf':
      return mapLeaf(value, 'leaf');
  }
}

function maskUrlCredentials(url: string): string {
  if (!URL.canParse(url)) return url;
  const parsed = new URL(url);
  if (parsed.username === '' && parsed.password === '') return url;
  parsed.username = 'redacted';
  parsed.password = '';
  return parsed.toString();
}

const maskLeaf: LeafMapper = (value, _kind, mark) => {
  if (typeof value !== 'string') return value;
  if (mark === 'secret') return value === '' ? '' : REDACTED;
  if (mark === 'credential-url') return maskUrlCredentials(value);
  return value;
};

/** A copy of `config` that is safe to print or log: secrets and URL credentials replaced. */
export function maskSecrets(config: Config): Config {
  // mapLeaves keeps every key and only replaces string leaves by strings, so the shape holds.
  return mapLeaves(config, ConfigSchema, maskLeaf) as Config;
}

/** `config` as a config-file document: secrets masked, durations as strings such as `1m30s`. */
export function toConfigDocument(config: Config): unknown {
  return mapLeaves(config, ConfigSchema, (value, kind, mark) =>
    kind === 'duration' && typeof value === 'number'
      ? formatDuration(value)
      : maskLeaf(value, kind, mark),
  );
}
