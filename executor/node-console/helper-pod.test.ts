import { describe, expect, it } from 'vitest';
import { helperPod, labelValue, nsenterCommand, SESSION_LABEL } from './helper-pod.js';

const pod = helperPod({
  node: 'worker-1',
  namespace: 'kubexa',
  image: 'registry.example/tools@sha256:0123',
  sessionId: 'sess/42:x',
  release: 'kubexa-agent',
  maxSessionSec: 600,
});

describe('node console helper Pod', () => {
  it('is pinned, privileged, in the host namespaces, tolerates every taint and mounts no token', () => {
    expect(pod.spec).toMatchObject({
      nodeName: 'worker-1',
      hostPID: true,
      hostNetwork: true,
      hostIPC: true,
      automountServiceAccountToken: false,
      restartPolicy: 'Never',
      tolerations: [{ operator: 'Exists' }],
    });
    expect(pod.spec?.containers[0]?.securityContext?.privileged).toBe(true);
  });

  it('ends on its own after the session: activeDeadlineSeconds and sleep cover the session', () => {
    expect(pod.spec?.activeDeadlineSeconds).toBeGreaterThan(600);
    expect(pod.spec?.containers[0]?.command).toEqual([
      'sleep',
      String(pod.spec?.activeDeadlineSeconds),
    ]);
  });

  it('is labelled with the session and the release, as valid label values', () => {
    expect(pod.metadata?.labels).toMatchObject({
      [SESSION_LABEL]: 'sess-42-x',
      'app.kubernetes.io/instance': 'kubexa-agent',
      'app.kubernetes.io/managed-by': 'kubexa-agent',
    });
    expect(labelValue(`-${'a'.repeat(80)}-`)).toHaveLength(63);
  });

  it('enters every namespace of PID 1 by default, or of the configured process', () => {
    expect(nsenterCommand('/bin/sh')).toEqual([
      'nsenter',
      '-t',
      '1',
      '-m',
      '-u',
      '-i',
      '-n',
      '-p',
      '--',
      '/bin/sh',
    ]);
    expect(nsenterCommand('/bin/bash', 4242).slice(0, 3)).toEqual(['nsenter', '-t', '4242']);
    expect(() => nsenterCommand('/bin/sh', 0)).toThrow(/process id/);
  });
});
