// Label and field selectors evaluated locally, so one pod watch serves every rule and a pod's
// later label change is re-judged without a second watch.

type Requirement = (values: Readonly<Record<string, string>>) => boolean;

/** Parses a label selector (`a=b,c!=d,e in (x,y),f notin (z),g,!h`); empty matches all. */
export function parseLabelSelector(selector: string): Requirement {
  const requirements = splitTopLevel(selector).map(parseRequirement);
  return (labels) => requirements.every((requirement) => requirement(labels));
}

function parseRequirement(term: string): Requirement {
  const set = /^([\w./-]+)\s+(in|notin)\s+\(([^)]*)\)$/.exec(term);
  if (set) {
    const [, key = '', op, list = ''] = set;
    const values = new Set(list.split(',').map((v) => v.trim()));
    return op === 'in'
      ? (labels) => values.has(labels[key] ?? '\0') && key in labels
      : (labels) => !(key in labels) || !values.has(labels[key] ?? '');
  }
  const compare = /^([\w./-]+)\s*(==|=|!=)\s*([\w./-]*)$/.exec(term);
  if (compare) {
    const [, key = '', op, value = ''] = compare;
    return op === '!=' ? (labels) => labels[key] !== value : (labels) => labels[key] === value;
  }
  if (/^![\w./-]+$/.test(term)) return (labels) => !(term.slice(1) in labels);
  if (/^[\w./-]+$/.test(term)) return (labels) => term in labels;
  throw new Error(`invalid label selector term: ${term}`);
}

/** Splits on commas outside parentheses; blank terms dropped. */
function splitTopLevel(selector: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i <= selector.length; i++) {
    const c = selector[i];
    if (c === '(') depth++;
    else if (c === ')') depth--;
    else if ((c === ',' && depth === 0) || c === undefined) {
      const term = selector.slice(start, i).trim();
      if (term !== '') out.push(term);
      start = i + 1;
    }
  }
  return out;
}

/**
 * Parses a field selector over the pod fields the API server supports for pods
 * (`metadata.name`, `metadata.namespace`, `spec.nodeName`, `status.phase`, ...): `=`, `==`, `!=`.
 * `fieldsOf` gives the pod's values.
 */
export function parseFieldSelector(selector: string): Requirement {
  const requirements = splitTopLevel(selector).map((term) => {
    const match = /^([\w.]+)\s*(==|=|!=)\s*(.*)$/.exec(term);
    if (!match) throw new Error(`invalid field selector term: ${term}`);
    const [, key = '', op, value = ''] = match;
    return op === '!='
      ? (fields: Readonly<Record<string, string>>) => (fields[key] ?? '') !== value
      : (fields: Readonly<Record<string, string>>) => (fields[key] ?? '') === value;
  });
  return (fields) => requirements.every((requirement) => requirement(fields));
}
