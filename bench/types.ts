/** One measured figure, printed beside a raw baseline measured in the same run. */
export interface BenchResult {
  readonly name: string;
  readonly itemsPerSecond: number;
  readonly baselineName: string;
  readonly baselineItemsPerSecond: number;
  /** The figure the design promises, if any: the run fails when it is missed. */
  readonly targetItemsPerSecond?: number;
  /** A ceiling instead (CPU share, memory): the run fails when the figure is above it. */
  readonly targetAtMost?: number;
  /** What both figures count, when not items/s (`% core`, `MiB`). */
  readonly unit?: string;
}

export interface BenchContext {
  /** A fresh directory for this case's files, removed afterwards. */
  readonly dir: string;
  /** Prints a line of detail (per-round figures) and keeps it in the case's results file. */
  readonly log: (line: string) => void;
}

/** A benchmark case. New cases are added to the list in run.ts. */
export interface BenchCase {
  readonly name: string;
  run(context: BenchContext): Promise<BenchResult[]>;
}

/** Items per second of `count` items done in `ms` milliseconds. */
export const rate = (count: number, ms: number): number => (count * 1000) / Math.max(ms, 1e-3);

/** The middle value (the upper one of an even count). */
export const median = (values: readonly number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? 0;
};
