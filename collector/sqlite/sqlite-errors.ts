// How the collector's SQLite files classify errors: one place, so the spill file and the pod-log
// checkpoint file apply the same policy (docs/buffer.md, "Unreadable or corrupt database").

/** The `code` of a SQLite error (better-sqlite3's SqliteError), e.g. SQLITE_CORRUPT_INDEX. */
export function sqliteCode(err: unknown): string | undefined {
  if (typeof err !== 'object' || err === null || !('code' in err)) return undefined;
  const { code } = err;
  return typeof code === 'string' && code.startsWith('SQLITE_') ? code : undefined;
}

/** A code or one of its extended codes: SQLITE_CORRUPT matches SQLITE_CORRUPT_VTAB. */
const hasCode = (err: unknown, primary: string): boolean => {
  const code = sqliteCode(err);
  return code === primary || code?.startsWith(`${primary}_`) === true;
};

/** A file with a layout this agent does not know: unreadable to it, like a corrupt one. */
export class SchemaVersionError extends Error {
  override readonly name = 'SchemaVersionError';
}

/**
 * Whether the file itself is damaged or foreign, so moving it aside is the fix: SQLITE_CORRUPT,
 * SQLITE_NOTADB (and their extended codes), or an unknown schema version. A full volume, an I/O
 * error or a permission problem is not: the file is fine, and moving it would lose its rows.
 */
export function isCorruption(err: unknown): boolean {
  return (
    err instanceof SchemaVersionError ||
    hasCode(err, 'SQLITE_CORRUPT') ||
    hasCode(err, 'SQLITE_NOTADB')
  );
}

/** Damage inside a database SQLite can still open: worth salvaging row by row. */
export function isDamage(err: unknown): boolean {
  return hasCode(err, 'SQLITE_CORRUPT') || hasCode(err, 'SQLITE_NOTADB');
}

/** Whether SQLite ran out of room: the volume is full (or the file hit max_page_count). */
export function isDiskFull(err: unknown): boolean {
  return hasCode(err, 'SQLITE_FULL');
}
