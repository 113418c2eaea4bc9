// Ending a console's processes, with or without a TTY. Closing the exec connection does not end
// them (client-node #2532, anchors D.2): a non-TTY `sleep 1000` keeps running in the container
// after the session is gone, and so does a `sleep` in a terminal (the runtime keeps the terminal
// open; measured on the real node, v5 and v4 alike, docs/consoles.md).
//
// So every console command runs under `/bin/sh -c` that puts a random marker into its environment and
// execs the command (same PID, nothing else changes: argv, stdio, exit status). Every descendant
// inherits the marker. Ending the session runs a second exec in the same container that finds the
// processes whose /proc/<pid>/environ holds the marker, sends them SIGTERM, and SIGKILL to those
// still there after a grace period. The marker is 128 random bits, so only this session's
// processes match; no file is written, so a read-only root filesystem is fine.
//
// A container without /bin/sh (distroless) cannot run the wrapper or the second exec: its command
// runs unwrapped, and closing stdin and the connection is all that can be done (docs/consoles.md).
import { randomBytes } from 'node:crypto';
import type { KubeConfig } from '@kubernetes/client-node';
import { openPodExec, type PodExecTarget } from './pod-exec-socket.js';

/** The environment variable that marks a console's processes. */
export const CONSOLE_MARKER_ENV = 'KUBEXA_CONSOLE_SESSION';
const SHELL = '/bin/sh';
/** SIGTERM first; SIGKILL after this long. */
const TERM_GRACE_SEC = 2;
/** The second exec itself is bounded: it never holds a session open. */
const KILL_EXEC_TIMEOUT_MS = 15_000;

export interface MarkedCommand {
  readonly marker: string;
  /** The argv to exec: the wrapper around the command. */
  readonly argv: readonly string[];
}

/**
 * How long the wrapper waits for its terminal to have a size, in steps of 50 ms. The runtime
 * applies the size sent on the resize channel after the process has started (kubectl has the
 * same race): measured on the real node, a TTY `sh` asked `stty size` right after the console
 * opened and saw no size (busybox: "standard input: No child processes", rows 0). Waiting here
 * means the command, a shell's line editor included, starts with the size the client asked for.
 */
const TERMINAL_SIZE_STEPS = 20;

/**
 * The wrapper's wait for the terminal's size: only on a terminal, only where `stty` exists, at
 * most TERMINAL_SIZE_STEPS × 50 ms; a size that never comes starts the command anyway. Its
 * variables are the wrapper's own names: a container that exports `i` keeps it.
 */
const WAIT_FOR_TERMINAL_SIZE =
  '[ -t 0 ] && command -v stty >/dev/null 2>&1 && { kubexa_step=0; ' +
  `while [ $kubexa_step -lt ${TERMINAL_SIZE_STEPS} ]; do ` +
  'kubexa_size=$(stty size 2>/dev/null); case "$kubexa_size" in [1-9]*" "[1-9]*) break;; esac; ' +
  'sleep 0.05 2>/dev/null || break; kubexa_step=$((kubexa_step+1)); done; }; ';

export interface MarkOptions {
  /** A terminal size was asked for: the command starts once the terminal has one (bounded). */
  readonly waitForTerminalSize?: boolean;
}

/** The command wrapped so that it and its descendants carry a fresh marker. */
export function markCommand(command: readonly string[], options: MarkOptions = {}): MarkedCommand {
  const marker = randomBytes(16).toString('hex');
  const mark = `${CONSOLE_MARKER_ENV}=${marker}; export ${CONSOLE_MARKER_ENV}; `;
  if (options.waitForTerminalSize !== true) {
    return { marker, argv: [SHELL, '-c', `${mark}exec "$@"`, 'sh', ...command] };
  }
  // The wait runs in a second shell exec'd with the marker already in its environment: a session
  // ended during the wait finds that shell (and its `stty` and `sleep`) by the marker, as it finds
  // the command after it. A shell only exports to what it starts, so the first one is never found.
  return {
    marker,
    argv: [
      SHELL,
      '-c',
      `${mark}exec ${SHELL} -c "$0" sh "$@"`,
      `${WAIT_FOR_TERMINAL_SIZE}exec "$@"`,
      ...command,
    ],
  };
}

/** The script the second exec runs: TERM every marked process, then KILL the ones left. */
export function killScript(marker: string): string {
  if (!/^[0-9a-f]{32}$/.test(marker)) throw new Error('a console marker is 32 hex digits');
  const find =
    'pids=; for d in /proc/[0-9]*; do ' +
    `grep -q "${CONSOLE_MARKER_ENV}=${marker}" "$d/environ" 2>/dev/null && pids="$pids \${d#/proc/}"; ` +
    'done';
  return [
    find,
    '[ -z "$pids" ] && exit 0',
    'kill -TERM $pids 2>/dev/null',
    `i=0; while [ $i -lt ${TERM_GRACE_SEC * 10} ]; do alive=; for p in $pids; do kill -0 $p 2>/dev/null && alive=1; done; [ -z "$alive" ] && exit 0; sleep 0.1; i=$((i+1)); done`,
    'kill -KILL $pids 2>/dev/null',
    'exit 0',
  ].join('\n');
}

type Target = Omit<PodExecTarget, 'command' | 'tty'>;

/** Runs a short command in the container; resolves with its exit code (-1: none). */
async function runOnce(kube: KubeConfig, target: Target, command: string[]): Promise<number> {
  const controller = new AbortController();
  const timer = setTimeout(() => {
    controller.abort();
  }, KILL_EXEC_TIMEOUT_MS);
  try {
    return await new Promise<number>((resolve, reject) => {
      openPodExec(
        kube,
        { ...target, command, tty: false },
        {
          onOutput: () => undefined,
          onEnd: (end) => {
            resolve(end.statusReceived ? end.exitCode : -1);
          },
        },
        { signal: controller.signal },
      )
        .then((exec) => {
          // Nothing to read from stdin: a shell that waits for it must not.
          exec.closeStdin();
          controller.signal.addEventListener('abort', () => {
            exec.close();
          });
        })
        .catch(reject);
    });
  } finally {
    clearTimeout(timer);
  }
}

/** Whether the container has /bin/sh to run the wrapper and the second exec. */
export async function hasShell(kube: KubeConfig, target: Target): Promise<boolean> {
  try {
    return (await runOnce(kube, target, [SHELL, '-c', 'exit 0'])) === 0;
  } catch {
    return false;
  }
}

/** Ends the marked processes in the container (TERM, then KILL); resolves when the exec is done. */
export async function killMarked(kube: KubeConfig, target: Target, marker: string): Promise<void> {
  await runOnce(kube, target, [SHELL, '-c', killScript(marker)]);
}
