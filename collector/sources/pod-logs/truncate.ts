// Cutting a line at max_line_bytes without splitting a UTF-8 sequence.

/** Result of limiting a string to a UTF-8 byte budget. */
export interface Truncated {
  readonly text: string;
  readonly truncated: boolean;
}

/**
 * Cuts `text` to at most `maxBytes` UTF-8 bytes on a character boundary. `maxBytes <= 0` means
 * unlimited. Text that fits is returned as is (no copy).
 */
export function truncateUtf8(text: string, maxBytes: number): Truncated {
  // A UTF-16 code unit is at most 3 UTF-8 bytes (a surrogate pair is 4 bytes for 2 units).
  if (maxBytes <= 0 || text.length * 3 <= maxBytes) return { text, truncated: false };
  const bytes = Buffer.from(text, 'utf8');
  if (bytes.length <= maxBytes) return { text, truncated: false };
  let end = maxBytes;
  // Back up over continuation bytes (10xxxxxx) to the start of the cut character.
  while (end > 0 && ((bytes[end] ?? 0) & 0xc0) === 0x80) end--;
  return { text: bytes.toString('utf8', 0, end), truncated: true };
}
