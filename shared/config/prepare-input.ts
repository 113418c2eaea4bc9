// Reads YAML-decoded data the way the Go agent's yaml.v3 decoding did, before zod sees it:
// a blank value is "not set", a blank list entry is skipped, a blank label value is "", a YAML
// number at a string position is that number's text. Unknown keys are dropped with a warning
// naming their full path, because a misspelled key would otherwise read as a setting in force.
import {
  describeSchema,
  formatPath,
  isPlainObject,
  type AnySchema,
  type SchemaNode,
} from './schema-walk.js';

export interface PreparedInput {
  readonly value: unknown;
  /** `unrecognized config key ignored: <path>` lines. */
  readonly warnings: readonly string[];
  /** Maps a path in `value` back to the file's own list positions (blank entries are dropped). */
  readonly toFilePath: (path: readonly PropertyKey[]) => PropertyKey[];
}

interface Walk {
  readonly warnings: string[];
  /** Keyed by the formatted path of a list in `value`: the file index of each kept entry. */
  readonly fileIndexes: Map<string, number[]>;
}

interface Where {
  readonly filePath: readonly PropertyKey[];
  readonly valuePath: readonly PropertyKey[];
}

function toSnakeCase(key: string): string {
  return key.replace(/[A-Z]/g, (letter) => `_${letter.toLowerCase()}`);
}

function unknownKeyWarning(path: readonly PropertyKey[], key: string, shape: object): string {
  const snake = toSnakeCase(key);
  const hint = snake !== key && Object.hasOwn(shape, snake) ? ` (did you mean ${snake}?)` : '';
  return `unrecognized config key ignored: ${formatPath(path)}${hint}`;
}

function prepareObject(
  value: Record<string, unknown>,
  node: Extract<SchemaNode, { kind: 'object' }>,
  where: Where,
  walk: Walk,
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, child] of Object.entries(value)) {
    if (!Object.hasOwn(node.shape, key)) {
      walk.warnings.push(unknownKeyWarning([...where.filePath, key], key, node.shape));
      continue;
    }
    const childSchema = node.shape[key];
    if (child === null || child === undefined || childSchema === undefined) continue;
    out[key] = prepare(
      child,
      childSchema,
      { filePath: [...where.filePath, key], valuePath: [...where.valuePath, key] },
      walk,
    );
  }
  return out;
}

function prepareArray(value: readonly unknown[], element: AnySchema, where: Where, walk: Walk) {
  const kept: unknown[] = [];
  const fileIndexes: number[] = [];
  value.forEach((item, index) => {
    if (item === null || item === undefined) return;
    const childWhere = {
      filePath: [...where.filePath, index],
      valuePath: [...where.valuePath, kept.length],
    };
    fileIndexes.push(index);
    kept.push(prepare(item, element, childWhere, walk));
  });
  if (kept.length !== value.length) walk.fileIndexes.set(formatPath(where.valuePath), fileIndexes);
  return kept;
}

function prepare(value: unknown, schema: AnySchema, where: Where, walk: Walk): unknown {
  const node = describeSchema(schema);
  switch (node.kind) {
    case 'object':
      return isPlainObject(value) ? prepareObject(value, node, where, walk) : value;
    case 'array':
      return Array.isArray(value) ? prepareArray(value, node.element, where, walk) : value;
    case 'record':
      if (!isPlainObject(value)) return value;
      return Object.fromEntries(
        Object.entries(value).map(([key, child]) => [
          key,
          child === null || child === undefined
            ? ''
            : prepare(
                child,
                node.value,
                { filePath: [...where.filePath, key], valuePath: [...where.valuePath, key] },
                walk,
              ),
        ]),
      );
    case 'string':
      return typeof value === 'number' || typeof value === 'boolean' ? String(value) : value;
    case 'duration':
    case 'leaf':
      return value;
  }
}

/** Cleans `data` (YAML-decoded) for `schema` and collects unknown-key warnings. */
export function prepareInput(data: unknown, schema: AnySchema): PreparedInput {
  const walk: Walk = { warnings: [], fileIndexes: new Map() };
  const value = prepare(data, schema, { filePath: [], valuePath: [] }, walk);
  const toFilePath = (path: readonly PropertyKey[]): PropertyKey[] => {
    const filePath: PropertyKey[] = [];
    path.forEach((segment, index) => {
      const indexes =
        typeof segment === 'number'
          ? walk.fileIndexes.get(formatPath(path.slice(0, index)))
          : undefined;
      filePath.push(typeof segment === 'number' ? (indexes?.[segment] ?? segment) : segment);
    });
    return filePath;
  };
  return { value, warnings: walk.warnings, toFilePath };
}
