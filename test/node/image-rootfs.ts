// An agent image's root filesystem unpacked from its docker-archive tarball (what
// test/node/images.ts builds and caches), and how to start its entrypoint from there: the image's
// own Node binary on the image's own files, with the image's environment. For benchmarks that
// measure a process "as the image runs it" without a container runtime.
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** The parts of an image's config (docker save's `<id>.json`) a run needs. */
interface ImageConfig {
  readonly config?: {
    readonly Env?: readonly string[];
    readonly Entrypoint?: readonly string[];
    readonly Cmd?: readonly string[] | null;
  };
}

export interface UnpackedImage {
  /** The directory the image's layers were extracted into, in order. */
  readonly rootfs: string;
  /** The entrypoint (and cmd) with its program and absolute paths under the rootfs. */
  readonly command: string;
  readonly args: readonly string[];
  /** The image's environment, PATH excepted (paths inside the image mean nothing here). */
  readonly env: Readonly<Record<string, string>>;
  /** `<program> --version`, e.g. v24.22.3 for the agent's images. */
  readonly version: string;
}

async function tarFile(archive: string, member: string): Promise<string> {
  const { stdout } = await run('tar', ['-xOf', archive, member], {
    encoding: 'utf8',
    maxBuffer: 64 * 2 ** 20,
  });
  return stdout;
}

/**
 * Extracts `archive`'s layers into `dest`/rootfs and resolves its entrypoint: a program named
 * without a slash is looked up in the image's PATH inside the rootfs; an argument that is an
 * absolute path existing in the rootfs is rewritten to it.
 */
export async function unpackImage(archive: string, dest: string): Promise<UnpackedImage> {
  const manifest = JSON.parse(await tarFile(archive, 'manifest.json')) as readonly {
    readonly Config: string;
    readonly Layers: readonly string[];
  }[];
  const entry = manifest[0];
  if (entry === undefined) throw new Error(`${archive}: manifest.json names no image`);
  const config = (JSON.parse(await tarFile(archive, entry.Config)) as ImageConfig).config ?? {};
  const rootfs = join(dest, 'rootfs');
  const layers = join(dest, 'layers');
  mkdirSync(rootfs, { recursive: true });
  mkdirSync(layers, { recursive: true });
  await run('tar', ['-xf', archive, '-C', layers, ...entry.Layers]);
  // In order, as the runtime stacks them (the agent's images are one layer, FROM scratch).
  for (const layer of entry.Layers) await run('tar', ['-xf', join(layers, layer), '-C', rootfs]);

  const env: Record<string, string> = {};
  for (const pair of config.Env ?? []) {
    const at = pair.indexOf('=');
    if (at > 0) env[pair.slice(0, at)] = pair.slice(at + 1);
  }
  const imagePath = (env['PATH'] ?? '/usr/local/bin:/usr/bin:/bin').split(':');
  delete env['PATH'];
  const [program, ...rest] = [...(config.Entrypoint ?? []), ...(config.Cmd ?? [])];
  if (program === undefined) throw new Error(`${archive}: the image has no entrypoint`);
  const command = program.includes('/')
    ? join(rootfs, program)
    : imagePath.map((dir) => join(rootfs, dir, program)).find((path) => existsSync(path));
  if (command === undefined || !existsSync(command)) {
    throw new Error(`${archive}: ${program} is not in the image's PATH (${imagePath.join(':')})`);
  }
  const args = rest.map((arg) =>
    arg.startsWith('/') && existsSync(join(rootfs, arg)) ? join(rootfs, arg) : arg,
  );
  const { stdout } = await run(command, ['--version'], { encoding: 'utf8' });
  return { rootfs, command, args, env, version: stdout.trim() };
}
