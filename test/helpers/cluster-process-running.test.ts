// The real node's teardown waits synchronously for its processes to end (stopRealNode in
// test/cluster/node.ts). The kubelet and containerd are children of the process that runs it, and
// an exited child stays a zombie until that process's event loop reaps it, which the synchronous
// wait never lets happen: the check must count a zombie as ended, or every wait runs its whole
// grace period and the vitest fork's exit is seen only after the teardown timeout.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { isProcessRunning } from '../cluster/node.js';

/** The state letter of /proc/<pid>/stat, read here independently of the code under test. */
function kernelState(pid: number): string {
  const stat = readFileSync(`/proc/${String(pid)}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2).charAt(0);
}

/** Blocks this thread (no event loop turn, so no reaping) until `pid` is a zombie. */
function blockUntilZombie(pid: number): void {
  const cell = new Int32Array(new SharedArrayBuffer(4));
  for (let i = 0; i < 400 && kernelState(pid) !== 'Z'; i++) Atomics.wait(cell, 0, 0, 25);
}

describe('isProcessRunning (the real node teardown wait)', () => {
  it('counts a running child as running and an exited, not yet reaped child as ended', async () => {
    const child = spawn('sleep', ['30'], { stdio: 'ignore' });
    const exited = once(child, 'exit');
    const pid = child.pid ?? 0;
    expect(pid).toBeGreaterThan(1);
    expect(isProcessRunning(pid)).toBe(true);
    child.kill('SIGKILL');
    blockUntilZombie(pid);
    expect(kernelState(pid)).toBe('Z');
    // Signal 0 still reaches a zombie: a check built on it alone would wait for it.
    expect(() => process.kill(pid, 0)).not.toThrow();
    expect(isProcessRunning(pid)).toBe(false);
    await exited;
    expect(isProcessRunning(pid)).toBe(false);
  });
});
