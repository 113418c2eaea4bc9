// The byte walker of TABLE answers gives what parsing the answer whole gives: the same rows kept,
// the same fields stripped, on generated tables with every shape a row can take, and it refuses
// (so the caller parses instead) what it does not handle.
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { compileNamePattern } from './policy.js';
import { parsedTableAnswer } from './run-query.js';
import { LAST_APPLIED_ANNOTATION } from './sanitize.js';
import { scanTable, TableShapeError } from './table-scan.js';

/** A small deterministic generator, so a failure can be replayed from its seed. */
function generator(seed: number) {
  // Spread small seeds over the state space, or the first draws of seed 1, 2, ... are all tiny.
  let state = Math.imul(seed, 0x9e3779b1) >>> 0 || 1;
  const next = (): number => {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return (state >>> 0) / 2 ** 32;
  };
  for (let i = 0; i < 4; i++) next();
  return {
    chance: (p: number) => next() < p,
    pick: <T>(values: readonly T[]): T => values[Math.floor(next() * values.length)] as T,
    int: (n: number) => Math.floor(next() * n),
  };
}

type Random = ReturnType<typeof generator>;
const NAMES = ['web-1', 'web-2', 'db-0', 'cache', 'caf\u00e9-\u2603', 'quote"d', 'back\\slash'];

function metadata(r: Random): Record<string, unknown> {
  const meta: Record<string, unknown> = {};
  if (r.chance(0.95)) meta['name'] = r.chance(0.97) ? r.pick(NAMES) : 42;
  meta['namespace'] = 'ns';
  meta['uid'] = randomBytes(4).toString('hex');
  if (r.chance(0.8)) {
    meta['managedFields'] = [
      { manager: 'kubectl', fieldsV1: { 'f:data': { '.': {}, 'f:x': {} } }, time: 'now' },
    ];
  }
  if (r.chance(0.7)) {
    const annotations: Record<string, string> = {};
    if (r.chance(0.6)) annotations[LAST_APPLIED_ANNOTATION] = '{"data":{"password":"c2VjcmV0"}}';
    if (r.chance(0.5)) annotations['team'] = 'a</b>&c';
    meta['annotations'] = annotations;
  }
  if (r.chance(0.3)) meta['generation'] = '@@12345678901234567890@@';
  return meta;
}

function row(r: Random): unknown {
  if (r.chance(0.03)) return r.pick([null, 7, 'text', []]);
  const cells: unknown[] = [r.pick(NAMES), r.int(5), r.chance(0.5) ? '@@9007199254740993@@' : '2d'];
  const value: Record<string, unknown> = { cells };
  if (r.chance(0.08)) return value;
  if (r.chance(0.05)) return { ...value, object: null };
  if (r.chance(0.03)) return { ...value, object: r.pick(['x', 3, [1]]) };
  const object: Record<string, unknown> = {
    kind: r.chance(0.3) ? 'Secret' : 'PartialObjectMetadata',
    apiVersion: 'meta.k8s.io/v1',
  };
  if (r.chance(0.97)) object['metadata'] = r.chance(0.98) ? metadata(r) : 'not an object';
  if (r.chance(0.3)) object['data'] = { password: 'c2VjcmV0' };
  if (r.chance(0.2)) object['stringData'] = { token: 'plain' };
  value['object'] = object;
  if (r.chance(0.2)) value['conditions'] = [{ type: 'Completed', status: 'True' }];
  return value;
}

/** JSON with big integers written as bare tokens (as the API server writes them). */
function tableText(r: Random, rows: number): string {
  const table: Record<string, unknown> = {
    kind: 'Table',
    apiVersion: 'meta.k8s.io/v1',
    metadata: { resourceVersion: '77', continue: 'abc', remainingItemCount: r.int(3) },
    columnDefinitions: [{ name: 'Name', type: 'string', description: 'the "name"\n' }],
    rows: Array.from({ length: rows }, () => row(r)),
  };
  if (r.chance(0.05)) delete table['rows'];
  const text = JSON.stringify(table);
  // Keys escaped as Go never does but JSON allows, and some whitespace.
  return text
    .replace(/"@@(\d+)@@"/g, '$1')
    .replace(/"managedFields"/g, (m) => (r.chance(0.1) ? '"managed\\u0046ields"' : m))
    .replace(/,"rows":/, (m) => (r.chance(0.2) ? ' ,\n "rows" : ' : m));
}

const OPTIONS = [
  { names: [], resource: 'configmaps' },
  { names: [], resource: 'secrets' },
  { names: [compileNamePattern('web-*')], resource: 'configmaps' },
  { names: [compileNamePattern('db-0'), compileNamePattern('caf*')], resource: 'pods' },
];

describe('TABLE answers walked as bytes', () => {
  it('keep and strip exactly what parsing the answer whole keeps and strips (400 tables)', () => {
    let rowsKept = 0;
    for (let seed = 1; seed <= 400; seed++) {
      const r = generator(seed);
      const body = Buffer.from(tableText(r, 5 + r.int(30)), 'utf8');
      const options = r.pick(OPTIONS);
      const scanned = scanTable(body, options);
      const parsed = parsedTableAnswer(body, options);
      expect(scanned.isTable, `seed ${String(seed)}`).toBe(true);
      expect(JSON.parse(scanned.payload.toString('utf8')), `seed ${String(seed)}`).toEqual(
        JSON.parse(parsed?.payload.toString('utf8') ?? ''),
      );
      const text = scanned.payload.toString('utf8');
      expect(text).not.toContain(LAST_APPLIED_ANNOTATION);
      expect(text).not.toMatch(/managed(?:F|\\u0046)ields/);
      // Secret values never, whatever the row's kind says, when the query named secrets.
      if (options.resource === 'secrets') expect(text).not.toContain('c2VjcmV0');
      rowsKept += (JSON.parse(text) as { rows?: unknown[] }).rows?.length ?? 0;
      // int64 cells and fields byte-identical.
      for (const big of ['12345678901234567890', '9007199254740993']) {
        if (text.includes(big.slice(0, 10))) expect(text).toContain(big);
      }
    }
    // The generator makes rows of every kind, most of them kept.
    expect(rowsKept).toBeGreaterThan(2000);
  });

  it('answers a Table of 500 kept rows byte for byte outside what it strips', () => {
    const rows = Array.from({ length: 500 }, (_, i) => ({
      cells: [`cm-${String(i)}`, 1, '9007199254740993'],
      object: { kind: 'PartialObjectMetadata', metadata: { name: `cm-${String(i)}`, uid: 'u' } },
    }));
    const body = Buffer.from(JSON.stringify({ kind: 'Table', metadata: {}, rows }), 'utf8');
    expect(scanTable(body, OPTIONS[0] ?? { names: [], resource: '' }).payload.equals(body)).toBe(
      true,
    );
  });

  it('knows a Secret by its kind written with an escape, as parsing it would', () => {
    const text =
      '{"kind":"Table","rows":[{"cells":[],"object":{"kind":"Secr\\u0065t",' +
      '"metadata":{"name":"a"},"data":{"password":"c2VjcmV0"}}}]}';
    const scanned = scanTable(Buffer.from(text), { names: [], resource: 'pods' });
    expect(JSON.parse(scanned.payload.toString('utf8'))).toEqual({
      kind: 'Table',
      rows: [{ cells: [], object: { kind: 'Secret', metadata: { name: 'a' } } }],
    });
  });

  it('reads continue and remainingItemCount, and says when the answer is not a Table', () => {
    const table = scanTable(
      Buffer.from('{"kind":"Table","metadata":{"continue":"t","remainingItemCount":3},"rows":[]}'),
      { names: [], resource: 'pods' },
    );
    expect(table.metadata).toEqual({ continue: 't', remainingItemCount: 3 });
    const list = scanTable(Buffer.from('{"kind":"PodList","items":[]}'), {
      names: [],
      resource: 'pods',
    });
    expect(list.isTable).toBe(false);
  });

  it('refuses what it does not handle, so the caller parses the answer instead', () => {
    const refused = [
      '[1,2]',
      '{"kind":"Table","rows":[{"object":{"metadata":{"name":"a"}}]',
      '{"kind":"Table","rows":[{"object":{"metadata":{"name":"a"}]}]}',
      '{"kind":"Table","rows":[{"object":{"metadata":{"name":"a","name":"b"}}}]}',
      '{"kind":"Table","rows":[{"object":{},"object":{"metadata":{"name":"a"}}}]}',
      '{"kind":"Table","rows":[tru]}',
      '{"kind":"Table","rows":[]} x',
      '{"kind":"Table","rows":["unterminated]}',
    ];
    for (const text of refused) {
      expect(() => scanTable(Buffer.from(text), { names: [], resource: 'pods' }), text).toThrow(
        TableShapeError,
      );
    }
  });
});
