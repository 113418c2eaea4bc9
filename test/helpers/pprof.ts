// A minimal reader of pprof's profile.proto (github.com/google/pprof/proto/profile.proto): the
// sample types, the sample count and the string table, enough for tests to prove a shipped
// profile is a real, parseable profile of the kind it claims to be.
import { gunzipSync } from 'node:zlib';
import { BinaryReader, WireType } from '@bufbuild/protobuf/wire';

export interface PprofSummary {
  /** "type/unit" of each sample value, e.g. "cpu/nanoseconds", "inuse_space/bytes". */
  readonly sampleTypes: string[];
  readonly samples: number;
  readonly durationNanos: bigint;
  readonly strings: string[];
}

function readValueType(bytes: Uint8Array): { type: number; unit: number } {
  const reader = new BinaryReader(bytes);
  const out = { type: 0, unit: 0 };
  while (reader.pos < reader.len) {
    const [field, wire] = reader.tag();
    if (field === 1) out.type = Number(reader.int64());
    else if (field === 2) out.unit = Number(reader.int64());
    else reader.skip(wire);
  }
  return out;
}

/** Gunzips (when gzipped) and reads a profile; throws on bytes that are not one. */
export function readPprof(raw: Uint8Array): PprofSummary {
  const gzipped = raw[0] === 0x1f && raw[1] === 0x8b;
  const bytes = gzipped ? gunzipSync(raw) : raw;
  const reader = new BinaryReader(bytes);
  const valueTypes: { type: number; unit: number }[] = [];
  const strings: string[] = [];
  let samples = 0;
  let durationNanos = 0n;
  while (reader.pos < reader.len) {
    const [field, wire] = reader.tag();
    if (field === 1 && wire === WireType.LengthDelimited)
      valueTypes.push(readValueType(reader.bytes()));
    else if (field === 2 && wire === WireType.LengthDelimited) {
      reader.bytes();
      samples++;
    } else if (field === 6 && wire === WireType.LengthDelimited) strings.push(reader.string());
    else if (field === 10 && wire === WireType.Varint) durationNanos = BigInt(reader.int64());
    else reader.skip(wire);
  }
  const text = (index: number) => {
    const value = strings[index];
    if (value === undefined) throw new Error(`string index ${String(index)} outside the table`);
    return value;
  };
  if (strings[0] !== '') throw new Error('string_table[0] must be empty: not a pprof profile');
  return {
    sampleTypes: valueTypes.map((v) => `${text(v.type)}/${text(v.unit)}`),
    samples,
    durationNanos,
    strings,
  };
}
