// The node project's cluster: the same control plane and kwok nodes as the integration project,
// plus the real worker node (test/cluster/node.ts). Only this project pays for the real node.
import type { TestProject } from 'vitest/node';
import { setupCluster } from '../cluster/global-setup.js';

export default function setup(project: TestProject): Promise<() => Promise<void>> {
  return setupCluster(project, { realNode: true });
}
