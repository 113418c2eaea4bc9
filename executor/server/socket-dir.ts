// The socket's directory and path, prepared so that nobody but the executor can plant, replace or
// reach the socket before its permissions are final: the directory is the executor's own and
// closed (0700) while the socket is bound, and opens to the shared group (0750) only after the
// socket itself is 0660. A live socket at the path is never replaced.
import { connect } from 'node:net';
import { chmod, chown, lstat, mkdir, unlink } from 'node:fs/promises';

/** How long the liveness probe of an existing socket may take. */
const PROBE_TIMEOUT_MS = 1_000;

function isErrno(err: unknown, code: string): boolean {
  return (err as NodeJS.ErrnoException | undefined)?.code === code;
}

/**
 * Creates the directory (0700) or takes over the executor's own directory from an earlier run;
 * refuses a directory owned by anyone else, or a symlink, which another user could have planted.
 * `ownUid` is the process's numeric uid (main.ts passes process.getuid()): not os.userInfo(),
 * which throws in a container whose /etc/passwd has no entry for the uid it runs as.
 */
export async function claimSocketDir(dir: string, ownUid: number): Promise<void> {
  try {
    await mkdir(dir, { mode: 0o700 });
  } catch (err: unknown) {
    if (!isErrno(err, 'EEXIST')) throw err;
  }
  const stats = await lstat(dir);
  if (!stats.isDirectory()) {
    throw new Error(`refusing socket directory ${dir}: it is not a directory (a symlink?)`);
  }
  if (stats.uid !== ownUid) {
    throw new Error(
      `refusing socket directory ${dir}: owned by uid ${stats.uid}, not this executor's uid ${ownUid}`,
    );
  }
  // Closed while the socket is prepared; opened by openSocketDir once the socket is final.
  await chmod(dir, 0o700);
}

/** True when something accepts connections at the path (a live executor). */
export function socketIsLive(socketPath: string): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(socketPath);
    const done = (live: boolean) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(live);
    };
    const timer = setTimeout(() => {
      done(false);
    }, PROBE_TIMEOUT_MS);
    socket.once('connect', () => {
      done(true);
    });
    socket.once('error', () => {
      done(false);
    });
  });
}

/**
 * Clears the path for a new socket: a dead socket or a stray file of an earlier run (in the
 * executor's own directory) is removed; a live socket is refused, never replaced.
 */
export async function clearSocketPath(socketPath: string): Promise<void> {
  const existing = await lstat(socketPath).catch((err: unknown) => {
    if (isErrno(err, 'ENOENT')) return undefined;
    throw err;
  });
  if (existing === undefined) return;
  if (existing.isDirectory()) {
    throw new Error(`refusing to replace ${socketPath}: it is a directory`);
  }
  if (existing.isSocket() && (await socketIsLive(socketPath))) {
    throw new Error(
      `refusing to replace ${socketPath}: another executor is listening on it (a live socket is never replaced)`,
    );
  }
  await unlink(socketPath);
}

/** Final permissions: socket 0660 and directory 0750 under the shared group, or owner only. */
export async function openSocketDir(
  dir: string,
  socketPath: string,
  group: number | undefined,
): Promise<void> {
  if (group === undefined) {
    await chmod(socketPath, 0o600);
    return;
  }
  await chown(socketPath, -1, group);
  await chmod(socketPath, 0o660);
  await chown(dir, -1, group);
  await chmod(dir, 0o750);
}
