// Every key path of the config file, for the documentation check (docs/configuration.md must
// name each one) and anything else that needs the list.
import { ConfigSchema } from './schema.js';
import { describeSchema, type AnySchema } from './schema-walk.js';

function collect(schema: AnySchema, prefix: string, out: string[]): void {
  const node = describeSchema(schema);
  if (node.kind === 'object') {
    for (const [key, child] of Object.entries(node.shape)) {
      const path = prefix === '' ? key : `${prefix}.${key}`;
      const childNode = describeSchema(child);
      if (childNode.kind !== 'object') out.push(path);
      collect(child, path, out);
    }
  } else if (node.kind === 'array' && describeSchema(node.element).kind === 'object') {
    collect(node.element, `${prefix}[]`, out);
  }
}

/** `collect.logs.tail_lines`, `collect.logs.rules[].pod_names`, ...: leaves and lists. */
export function configKeyPaths(): string[] {
  const out: string[] = [];
  collect(ConfigSchema, '', out);
  return out;
}
