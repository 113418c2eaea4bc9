// A machine that cannot run the real node fails the run with what is missing and how to get it,
// instead of skipping or hanging.
import { describe, expect, it } from 'vitest';
import { missingNodePrerequisites } from '../cluster/node.js';
import { startCluster } from '../cluster/cluster.js';
import { inject } from 'vitest';
import { buildAgentImages } from './images.js';

describe('real node prerequisites', () => {
  it('are all present on this machine with the built binaries', () => {
    expect(missingNodePrerequisites(inject('clusterBinDir'))).toEqual([]);
  });

  it('name each missing binary with the command that builds it', () => {
    const missing = missingNodePrerequisites('/nonexistent-bin');
    expect(missing).toContain('kubelet in /nonexistent-bin (run npm run cluster:build)');
    expect(missing).toContain('images/pause.tar in /nonexistent-bin (run npm run cluster:build)');
  });

  it('name a missing system tool with the package that provides it', () => {
    const path = process.env['PATH'];
    process.env['PATH'] = '/nonexistent';
    try {
      const missing = missingNodePrerequisites(inject('clusterBinDir'));
      expect(missing).toContain('runc (apt-get install runc)');
      expect(missing).toContain('iptables (apt-get install iptables)');
    } finally {
      process.env['PATH'] = path;
    }
  });

  it('fail the cluster start with that list', async () => {
    const path = process.env['PATH'];
    process.env['PATH'] = '/nonexistent';
    try {
      await expect(
        startCluster({
          name: 'never',
          workdir: '/nonexistent-workdir',
          env: { ...process.env, PATH: path },
          realNode: true,
        }),
      ).rejects.toThrow(
        /the real node cannot start on this machine; missing:\n[\s\S]* {2}- runc \(apt-get install runc\)/,
      );
    } finally {
      process.env['PATH'] = path;
    }
  });

  it('fail the image build with each missing tool and the package that provides it', async () => {
    const path = process.env['PATH'];
    process.env['PATH'] = '/nonexistent';
    try {
      await expect(buildAgentImages()).rejects.toThrow(
        'cannot build the images on this machine; missing:\n' +
          '  - dockerd (apt-get install docker.io)\n' +
          '  - docker (apt-get install docker.io)\n' +
          '  - debootstrap (apt-get install debootstrap)\n' +
          '  - npm (apt-get install npm)',
      );
    } finally {
      process.env['PATH'] = path;
    }
  });
});
