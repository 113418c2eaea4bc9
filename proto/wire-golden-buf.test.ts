// The golden wire bytes (test/fixtures/golden/*.hex) read by an independent decoder: buf (the
// Go protobuf runtime, from the npm package @bufbuild/buf) against the .proto files themselves.
// wire-golden.test.ts checks that its hand encoder, the generated ts-proto code and the fixture
// agree; all three are ours, so one mistake shared by them (a field number misread from the
// table, a ts-proto codec bug copied into the fixture) would pass there. Here, for every fixture:
//   1. buf decodes the bytes to the proto3 JSON committed beside it (<name>.json, reviewed by
//      hand against the .proto files);
//   2. the generated code decodes the same bytes to the same JSON (its toJSON);
//   3. buf encodes that JSON back to exactly the fixture's bytes.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentMessage, GatewayMessage } from './index.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const protoDir = join(root, 'proto');
const goldenDir = join(root, 'test', 'fixtures', 'golden');
const buf = join(root, 'node_modules', '.bin', 'buf');

const fixtures = readdirSync(goldenDir)
  .filter((file) => file.endsWith('.hex'))
  .map((file) => file.slice(0, -'.hex'.length))
  .sort();

let work = '';
let image = '';

beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), 'kubexa-golden-'));
  // One compiled image of the .proto files, so each conversion does not recompile them.
  image = join(work, 'image.binpb');
  execFileSync(buf, ['build', '-o', image], { cwd: protoDir, stdio: ['ignore', 'ignore', 'pipe'] });
});

afterAll(() => {
  if (work !== '') rmSync(work, { recursive: true, force: true });
});

/** `agent-*` fixtures are AgentMessages, `gateway-*` GatewayMessages. */
const typeOf = (name: string): string =>
  name.startsWith('gateway-') ? 'agent.v1.GatewayMessage' : 'agent.v1.AgentMessage';

/** buf convert, from a file to stdout; `format` is json or binpb. */
function bufConvert(name: string, input: Buffer, from: 'json' | 'binpb', to: 'json' | 'binpb') {
  const path = join(work, `${name}.${from}`);
  writeFileSync(path, input);
  return execFileSync(
    buf,
    ['convert', image, '--type', typeOf(name), '--from', path, '--to', `-#format=${to}`],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
}

const fixtureBytes = (name: string): Buffer =>
  Buffer.from(readFileSync(join(goldenDir, `${name}.hex`), 'utf8').trim(), 'hex');

/** The committed JSON; a missing one is written from buf's decoding and the test fails. */
function fixtureJson(name: string, decoded: unknown): unknown {
  const path = join(goldenDir, `${name}.json`);
  if (!existsSync(path)) {
    writeFileSync(path, `${JSON.stringify(decoded, null, 2)}\n`);
    throw new Error(`golden fixture ${name}.json was missing: written, review and commit it`);
  }
  return JSON.parse(readFileSync(path, 'utf8'));
}

describe('golden wire bytes read by buf against the .proto files', () => {
  it('has a JSON reading committed for every hex fixture, and no other', () => {
    const json = readdirSync(goldenDir)
      .filter((file) => file.endsWith('.json'))
      .map((file) => file.slice(0, -'.json'.length))
      .sort();
    expect(fixtures.length).toBeGreaterThanOrEqual(14);
    expect(json).toEqual(fixtures);
  });

  describe.each(fixtures)('%s', (name) => {
    it('buf decodes the bytes to the committed JSON, and so does the generated code', () => {
      const decoded: unknown = JSON.parse(
        bufConvert(name, fixtureBytes(name), 'binpb', 'json').toString(),
      );
      const expected = fixtureJson(name, decoded);
      expect(decoded).toEqual(expected);
      const generated = name.startsWith('gateway-')
        ? GatewayMessage.toJSON(GatewayMessage.decode(fixtureBytes(name)))
        : AgentMessage.toJSON(AgentMessage.decode(fixtureBytes(name)));
      expect(generated).toEqual(expected);
    });

    it('buf encodes the committed JSON to exactly the fixture bytes', () => {
      const json = readFileSync(join(goldenDir, `${name}.json`));
      expect(bufConvert(name, json, 'json', 'binpb').toString('hex')).toBe(
        fixtureBytes(name).toString('hex'),
      );
    });
  });
});
