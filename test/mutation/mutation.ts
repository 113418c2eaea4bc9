/** One hand-written mutation: a promise broken on purpose, and the tests that must notice. */
export interface Mutation {
  /** Unique, short, kebab-case: `clock-nan-delay`. */
  readonly id: string;
  /** The heading it belongs to in docs/testing-mutations.md: `buffer`, `pod logs`, ... */
  readonly area: string;
  /** Path from the repository root. */
  readonly file: string;
  /**
   * The exact text to replace (whitespace included), found exactly once in the file. Usually one
   * whole line without its indentation. If the code changes and it is no longer found, the run
   * fails, so the list cannot silently rot.
   */
  readonly original: string;
  /** What it becomes. An empty string deletes it. */
  readonly replacement: string;
  /** Test files (from the repository root) that must fail with the mutation applied. */
  readonly tests: readonly string[];
  /**
   * Only the tests whose full name matches this text (vitest's `-t`, matched as a literal, not a
   * pattern): for a big integration file where one test holds the promise. All tests when left out.
   */
  readonly testName?: string;
  /** The vitest project of those tests; `unit` when left out. */
  readonly project?: 'unit' | 'integration' | 'chart';
  /** The promise the mutation breaks, in a few words. */
  readonly breaks: string;
  /** Part of the quick subset CI runs (`npm run test:mutation -- --ci`): fast unit tests only. */
  readonly ci?: boolean;
}
