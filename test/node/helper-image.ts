// The node console's helper image on the real node: the local busybox image (it has sh, sleep and
// the nsenter applet), referenced by digest as exec.node.image requires. Nothing is pulled: the
// image is already in the node's containerd, and a name@sha256 reference to it is added there so
// the kubelet finds it (IfNotPresent) under the pinned name.
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';

/** Adds `<repository>@sha256:<digest>` for a local image and returns that reference. */
export function pinLocalImage(binDir: string, containerdSocket: string, image: string): string {
  const ctr = (...args: string[]) =>
    execFileSync(
      join(binDir, 'ctr'),
      ['--address', containerdSocket, '--namespace', 'k8s.io', ...args],
      { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] },
    );
  const listing = ctr('images', 'ls', `name==${image}`);
  const digest = /sha256:[0-9a-f]{64}/.exec(listing)?.[0];
  if (digest === undefined) {
    throw new Error(`image ${image} is not in the node's containerd:\n${listing}`);
  }
  const repository = image.replace(/:[^:/]+$/, '');
  const pinned = `${repository}@${digest}`;
  if (!ctr('images', 'ls', '-q').split('\n').includes(pinned)) ctr('images', 'tag', image, pinned);
  return pinned;
}
