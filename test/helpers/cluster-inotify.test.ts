// The inotify limit check the cluster runs at start, on a stand-in file for the sysctl.
import { describe, expect, it } from 'vitest';
import { ensureInotifyInstances, type LimitFile } from '../cluster/inotify.js';

function standIn(value: string, writable: boolean): LimitFile & { text: string } {
  const file = {
    path: '/proc/sys/fs/inotify/max_user_instances',
    text: `${value}\n`,
    read: () => file.text,
    write: (_: string, text: string) => {
      if (!writable) throw new Error('EACCES: permission denied');
      file.text = text;
    },
  };
  return file;
}

describe('the inotify instance limit at cluster start', () => {
  it('raises a low limit and leaves a high one alone', () => {
    const low = standIn('128', true);
    expect(ensureInotifyInstances(1024, low)).toEqual({
      instances: 1024,
      raised: true,
      problem: undefined,
    });
    expect(low.text).toBe('1024');
    const high = standIn('8192', true);
    expect(ensureInotifyInstances(1024, high)).toEqual({
      instances: 8192,
      raised: false,
      problem: undefined,
    });
    expect(high.text).toBe('8192\n');
  });

  it('says what fails and how to fix it when the limit cannot be raised', () => {
    const result = ensureInotifyInstances(1024, standIn('128', false));
    expect(result.instances).toBe(128);
    expect(result.raised).toBe(false);
    expect(result.problem).toMatch(/is 128 and could not be raised to 1024 \(EACCES/);
    expect(result.problem).toContain('"too many open files"');
    expect(result.problem).toContain('sysctl -w fs.inotify.max_user_instances=1024');
  });
});
