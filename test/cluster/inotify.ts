// kwok opens one inotify instance per followed log (fsnotify, in the kubelet's log reader it
// reuses), and the kernel's per-user limit, fs.inotify.max_user_instances (128 by default), is
// shared by every process of that user on the machine. Past it a follow fails with "too many open
// files" and the collector, the bench and the tests loop on reconnects. The cluster raises it at
// start when it can (root), and says plainly when it cannot.
import { readFileSync, writeFileSync } from 'node:fs';

export const INOTIFY_INSTANCES_PATH = '/proc/sys/fs/inotify/max_user_instances';
/** 200 followed streams (the bench's and the seed's maximum) with room for everything else. */
export const INOTIFY_INSTANCES_WANTED = 1024;

export interface InotifyLimit {
  /** The limit after the check. */
  readonly instances: number;
  /** The limit was raised by this check. */
  readonly raised: boolean;
  /** Why it is below what is wanted, with the command that fixes it; undefined when it is not. */
  readonly problem: string | undefined;
}

/** How the limit is read and written: the sysctl's file, or a stand-in in tests. */
export interface LimitFile {
  readonly path: string;
  read(path: string): string;
  write(path: string, text: string): void;
}

const SYSCTL: LimitFile = {
  path: INOTIFY_INSTANCES_PATH,
  read: (path) => readFileSync(path, 'utf8'),
  write: (path, text) => {
    writeFileSync(path, text);
  },
};

/** Reads the limit and raises it to `wanted` when it is lower; never throws. */
export function ensureInotifyInstances(
  wanted = INOTIFY_INSTANCES_WANTED,
  file: LimitFile = SYSCTL,
): InotifyLimit {
  const path = file.path;
  let current: number;
  try {
    current = Number.parseInt(file.read(path).trim(), 10);
  } catch (err: unknown) {
    const reason = err instanceof Error ? err.message : String(err);
    return {
      instances: Number.NaN,
      raised: false,
      problem: `cannot read ${path} (${reason}); the inotify instance limit is unknown`,
    };
  }
  if (current >= wanted) return { instances: current, raised: false, problem: undefined };
  try {
    file.write(path, String(wanted));
    return { instances: wanted, raised: true, problem: undefined };
  } catch (err: unknown) {
    const reason = err instanceof Error ? err.message : String(err);
    return {
      instances: current,
      raised: false,
      problem:
        `fs.inotify.max_user_instances is ${String(current)} and could not be raised to ` +
        `${String(wanted)} (${reason}): kwok opens one per followed log, shared with every ` +
        `process of this user, so following more than about ${String(Math.max(0, current - 16))} ` +
        `logs fails with "too many open files". As root: sysctl -w ` +
        `fs.inotify.max_user_instances=${String(wanted)}`,
    };
  }
}
