// What the source reads from a pod object: its identity without revision labels, a container's
// restart count, restart times and state, and how a log request resumes or tails.
import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import {
  containerKeyOf,
  containerStateOf,
  podIdentity,
  restartCountOf,
  restartTimesOf,
  resumeOrTail,
} from './pod-fields.js';

const pod: V1Pod = {
  metadata: {
    name: 'web-1',
    namespace: 'prod',
    uid: 'uid-1',
    labels: { app: 'web', 'pod-template-hash': 'abc', 'controller-revision-hash': 'r1' },
  },
  spec: { nodeName: 'node-a', containers: [{ name: 'app' }, { name: 'side' }] },
  status: {
    containerStatuses: [
      {
        name: 'app',
        image: 'i',
        imageID: '',
        ready: true,
        restartCount: 2,
        // As the watch hands them over: strings, not Dates.
        state: { running: { startedAt: '2025-03-01T10:00:07.900Z' as unknown as Date } },
        lastState: { terminated: { exitCode: 1, finishedAt: new Date('2025-03-01T10:00:05Z') } },
      },
      {
        name: 'side',
        image: 'i',
        imageID: '',
        ready: false,
        restartCount: 0,
        state: { waiting: { reason: 'CrashLoopBackOff' } },
      },
    ],
  },
};

describe('pod fields', () => {
  it('names the pod without its revision labels, and blanks what is missing', () => {
    expect(podIdentity(pod)).toEqual({
      uid: 'uid-1',
      name: 'web-1',
      namespace: 'prod',
      labels: { app: 'web' },
      nodeName: 'node-a',
    });
    expect(podIdentity({})).toEqual({ uid: '', name: '', namespace: '', labels: {}, nodeName: '' });
    expect(containerKeyOf(pod, 'app')).toBe('uid-1/app');
  });

  it("reads a container's restart count, restart times (whole seconds) and state", () => {
    expect(restartCountOf(pod, 'app')).toBe(2);
    expect(restartCountOf(pod, 'absent')).toBe(0);
    expect(restartTimesOf(pod, 'app')).toEqual({
      previousFinishedSec: Date.parse('2025-03-01T10:00:05Z') / 1000,
      startedSec: Date.parse('2025-03-01T10:00:07Z') / 1000,
    });
    expect(restartTimesOf(pod, 'side')).toEqual({
      previousFinishedSec: undefined,
      startedSec: undefined,
    });
    expect(containerStateOf(pod, 'app')).toEqual({ kind: 'running', text: 'running' });
    expect(containerStateOf(pod, 'side')).toEqual({
      kind: 'waiting',
      text: 'waiting: CrashLoopBackOff',
    });
    expect(containerStateOf(pod, 'absent')).toEqual({ kind: 'unknown', text: 'unknown' });
  });

  it('resumes from the second of the position, tails on first sight, else reads from the start', () => {
    const position = { sec: 1_740_823_207, nanos: 5, count: 1 };
    expect(resumeOrTail(position, true, 10)).toEqual({ sinceTime: new Date(1_740_823_207_000) });
    expect(resumeOrTail(undefined, true, 10)).toEqual({ tailLines: 10 });
    expect(resumeOrTail(undefined, false, 10)).toEqual({});
  });
});
