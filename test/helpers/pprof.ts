// Decodes a shipped profile with pprof-format (DataDog's maintained encoder and decoder of
// github.com/google/pprof/proto/profile.proto), so tests prove a profile parses with a real pprof
// parser, not with one written for the tests. Go's net/http/pprof gzips its output; the bytes
// are gunzipped first when they carry the gzip magic.
import { gunzipSync } from 'node:zlib';
import { Profile } from 'pprof-format';

export interface DecodedPprof {
  readonly profile: Profile;
  /** "type/unit" of each sample value, e.g. "cpu/nanoseconds", "inuse_space/bytes". */
  readonly sampleTypes: string[];
  readonly durationNanos: bigint;
  /** The function names the samples' stacks reach (through location, line and function). */
  readonly sampledFunctions: Set<string>;
}

/** Gunzips (when gzipped) and decodes a profile; throws on bytes that are not one. */
export function decodePprof(raw: Uint8Array): DecodedPprof {
  const gzipped = raw[0] === 0x1f && raw[1] === 0x8b;
  const profile = Profile.decode(gzipped ? gunzipSync(raw) : raw);
  const strings = profile.stringTable.strings;
  const text = (index: number | bigint): string => {
    const value = strings[Number(index)];
    if (value === undefined) throw new Error(`string index ${String(index)} outside the table`);
    return value;
  };
  if (strings[0] !== '') throw new Error('string_table[0] must be empty: not a pprof profile');
  const locations = new Map(profile.location.map((l) => [String(l.id), l]));
  const functions = new Map(profile.function.map((f) => [String(f.id), f]));
  const sampledFunctions = new Set<string>();
  for (const sample of profile.sample) {
    for (const id of sample.locationId) {
      const location = locations.get(String(id));
      if (location === undefined) throw new Error(`sample names unknown location ${String(id)}`);
      for (const line of location.line) {
        const fn = functions.get(String(line.functionId));
        if (fn === undefined)
          throw new Error(`line names unknown function ${String(line.functionId)}`);
        sampledFunctions.add(text(fn.name));
      }
    }
  }
  return {
    profile,
    sampleTypes: profile.sampleType.map((v) => `${text(v.type)}/${text(v.unit)}`),
    durationNanos: BigInt(profile.durationNanos),
    sampledFunctions,
  };
}
