import { crc32 } from 'node:zlib';

/**
 * The checksum stored with every spilled record and verified when it is read back: CRC-32 of
 * the id, continued over the payload. CRC-32 catches every burst of up to 32 damaged bits and
 * all but 1 in 2^32 random damage, which is the threat here (a bad sector, a torn or stray
 * write, a hand edit), not an attacker: whoever can write the volume can write a matching
 * checksum too, whatever the function. zlib's CRC-32 is native and costs far less per record
 * than the SQLite row it guards (docs/buffer.md, Benchmark); a cryptographic hash would add
 * nothing against that threat.
 */
export function recordChecksum(id: string, payload: Uint8Array): number {
  return crc32(payload, crc32(id));
}
