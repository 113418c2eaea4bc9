// `npm run bundle`: each process (collector, executor) as one tree-shaken ESM file with its
// source map in dist/bundle/, and the native modules it loads beside it in
// dist/bundle/node_modules/ (a .node addon cannot be bundled). The bundle loads only the modules
// the process reaches, not every module its dependencies' entry points import: most of an idle
// collector's memory is module code (see the README's Sizing section).
//
// The source text itself stays in V8's heap for the process's life (lazy compilation needs it), so
// the bundle is written small: whitespace and comments minified (names kept, so stack traces still
// name functions; licence comments go to <process>.js.LEGAL.txt), and ASCII only. One non-ASCII
// character anywhere (a comment, a regular expression literal, which esbuild does not escape)
// makes V8 hold the whole text as a two-byte string, twice its size; the build fails on one.
//
// Run the bundle with `node --enable-source-maps dist/bundle/collector.js` for stack traces in
// the TypeScript sources. `--outdir=DIR` writes it elsewhere (tests and the bench do): the
// directory is self-contained and runs from anywhere.
import { cpSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { build, type Metafile, type Plugin } from 'esbuild';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const { values: args } = parseArgs({
  options: { outdir: { type: 'string' }, only: { type: 'string' } },
  strict: true,
});
const outDir = resolve(args.outdir ?? join(root, 'dist', 'bundle'));

/** The processes bundled, as output name -> entry point. */
const ENTRY_POINTS = {
  collector: 'collector/main.ts',
  executor: 'executor/main.ts',
} as const;

/**
 * Packages left out of the bundle and copied beside it, each with the files it needs at run
 * time: better-sqlite3 loads its addon through `bindings`, which finds it by the package's path.
 */
const NATIVE_PACKAGES: Readonly<Record<string, readonly string[]>> = {
  'better-sqlite3': ['package.json', 'LICENSE', 'lib', 'build/Release/better_sqlite3.node'],
  bindings: ['package.json', 'LICENSE.md', 'bindings.js'],
  'file-uri-to-path': ['package.json', 'LICENSE', 'index.js'],
};
/** Of those, the ones the bundled code imports, each with the packages it needs at run time. */
const EXTERNAL: Readonly<Record<string, readonly string[]>> = {
  'better-sqlite3': ['better-sqlite3', 'bindings', 'file-uri-to-path'],
};

/**
 * Worker threads a process starts from a file of their own, as output name -> entry point,
 * bundled beside the process's file (each its own file: a thread loads only what it runs).
 */
const THREAD_ENTRY_POINTS: Readonly<Record<keyof typeof ENTRY_POINTS, Record<string, string>>> = {
  // Started by the first console (collector/consoles/console-relay-thread.ts).
  collector: { 'console-relay-worker': 'collector/consoles/console-relay-worker.ts' },
  executor: {},
};

/** The processes built, each with its thread entry points: one esbuild build a process. */
function selectedProcesses(only: string | undefined): (keyof typeof ENTRY_POINTS)[] {
  if (only === undefined) return Object.keys(ENTRY_POINTS) as (keyof typeof ENTRY_POINTS)[];
  if (!(only in ENTRY_POINTS)) {
    throw new Error(
      `--only=${only}: not a process; use one of ${Object.keys(ENTRY_POINTS).join(', ')}`,
    );
  }
  return [only as keyof typeof ENTRY_POINTS];
}

// Bundled CommonJS dependencies call require() for Node's built-ins and read __dirname, which an
// ES module does not have: give them both, from the bundle's own URL.
const BANNER = [
  "import { createRequire as __kubexaCreateRequire } from 'node:module';",
  "import { fileURLToPath as __kubexaFileURLToPath } from 'node:url';",
  "import { dirname as __kubexaDirname } from 'node:path';",
  'const require = __kubexaCreateRequire(import.meta.url);',
  'const __filename = __kubexaFileURLToPath(import.meta.url);',
  'const __dirname = __kubexaDirname(__filename);',
].join('\n');

/**
 * Node built-ins the bundle loads through require() rather than an `import` statement. An ES
 * module import of a built-in builds its namespace, which reads every export,
 * and some exports are getters that load far more than the code uses: on Node 24, `node:http`'s
 * WebSocket, CloseEvent and MessageEvent load undici (Node's fetch and WebSocket, which nothing
 * here uses): 58.8 MiB RSS for a process that imports `node:http` against 46.6 MiB for one that
 * requires it (Node 24.22.3, the image's); `node:util`'s namespace loads its MIME, parseArgs and
 * text-encoding modules the same way. Each import of one of these, from our code or a
 * dependency, resolves to a CommonJS module that re-exports the built-in (`module.exports =
 * require(...)`): esbuild's interop then reads an export only where the code uses it, whatever
 * getters the running Node has, so the bundle is the same on the Node that builds it and the one
 * that runs it. require() calls are left as they are (they already read nothing).
 */
const REQUIRED_BUILTINS: readonly string[] = ['http', 'util'];

const REQUIRED_BUILTIN_NAMESPACE = 'required-builtin';

function requiredBuiltins(builtins: readonly string[]): Plugin {
  const filter = new RegExp(`^(node:)?(${builtins.join('|')})$`);
  return {
    name: 'required-builtins',
    setup(builder) {
      builder.onResolve({ filter }, (args) =>
        args.kind === 'import-statement' || args.kind === 'dynamic-import'
          ? { path: args.path.replace(/^node:/, ''), namespace: REQUIRED_BUILTIN_NAMESPACE }
          : undefined,
      );
      builder.onLoad({ filter: /.*/, namespace: REQUIRED_BUILTIN_NAMESPACE }, (args) => ({
        contents: `module.exports = require(${JSON.stringify(`node:${args.path}`)});\n`,
        loader: 'js',
      }));
    },
  };
}

/**
 * What the collector's bundle leaves out of what its dependencies import, each measured on the
 * collector as the image runs it (README, "Idle footprint": together 3.5 MB of bundle text and
 * about 6 MiB of idle RSS). A module left out here fails the build if the collector's code names
 * one of its exports, and one stubbed fails at the call with the reason, never quietly:
 *
 * - `@kubernetes/client-node` resolves to its `dist/config.js`, the module of `KubeConfig`, the
 *   only value the collector imports from it (the rest are types). The package's entry point
 *   re-exports its informer cache, watch, log and API helpers, whose serializer holds every
 *   generated model class.
 * - client-node's generated models (`dist/gen/models/`) are marked free of side effects: each
 *   module assigns static fields to its class, which esbuild keeps whether or not the class is
 *   used (about 430 KB of model classes, none of them used by the collector).
 * - `node-fetch`, which client-node's `config.js` imports for `applyToFetchOptions` and its
 *   generated HTTP library for the API classes, is a stub that throws: the collector calls
 *   neither (it makes its own requests with `applyToHTTPSOptions`), and node-fetch loads
 *   whatwg-url and tr46's Unicode tables when the bundle starts (about 320 KB).
 * - zod's locale namespace holds English only, the messages `shared/config` reports (the other
 *   46 locales were about 300 KB).
 *
 * The executor's bundle keeps client-node whole: its Pod and access review clients are the
 * generated API classes, which fetch with node-fetch.
 */
function collectorNarrowing(): Plugin {
  const clientNode = dirname(
    createRequire(join(root, 'package.json')).resolve('@kubernetes/client-node/package.json'),
  );
  const generatedModels = join(clientNode, 'dist', 'gen', 'models') + sep;
  const inClientNode = clientNode + sep;
  const stubs = 'collector-narrowing';
  return {
    name: 'collector-narrowing',
    setup(builder) {
      builder.onResolve({ filter: /^@kubernetes\/client-node$/ }, (args) =>
        args.importer.includes(`${sep}node_modules${sep}`)
          ? undefined
          : { path: join(clientNode, 'dist', 'config.js') },
      );
      builder.onResolve({ filter: /^\.\.?\// }, (args) => {
        if (!args.importer.startsWith(inClientNode)) return undefined;
        const path = resolve(args.resolveDir, args.path);
        return path.startsWith(generatedModels) ? { path, sideEffects: false } : undefined;
      });
      builder.onResolve({ filter: /^node-fetch$/ }, (args) =>
        args.importer.startsWith(inClientNode)
          ? { path: 'node-fetch', namespace: stubs }
          : undefined,
      );
      builder.onResolve({ filter: /\/locales\/index\.js$/ }, (args) =>
        /[\\/]node_modules[\\/]zod[\\/]/.test(args.importer)
          ? {
              path: 'zod-locales',
              namespace: stubs,
              pluginData: resolve(args.resolveDir, args.path),
            }
          : undefined,
      );
      builder.onLoad({ filter: /.*/, namespace: stubs }, (args) => {
        if (args.path === 'node-fetch') {
          const refusal = JSON.stringify(
            "node-fetch is not in the collector's bundle (scripts/bundle.ts, collectorNarrowing): the collector makes its requests with KubeConfig.applyToHTTPSOptions, not client-node's fetch-based clients",
          );
          return {
            contents: [
              `export class Headers { constructor() { throw new Error(${refusal}); } }`,
              `export default function fetch() { throw new Error(${refusal}); }`,
              '',
            ].join('\n'),
            loader: 'js',
          };
        }
        const locales = args.pluginData as string;
        return {
          contents: `export { default as en } from ${JSON.stringify(join(dirname(locales), 'en.js'))};\n`,
          loader: 'js',
          resolveDir: dirname(locales),
        };
      });
    },
  };
}

/** Plugins of one process's build beyond the ones every build has. */
const PROCESS_PLUGINS: Readonly<Record<keyof typeof ENTRY_POINTS, () => readonly Plugin[]>> = {
  collector: () => [collectorNarrowing()],
  executor: () => [],
};

function copyNativePackages(names: ReadonlySet<string>): void {
  const requireFromRoot = createRequire(join(root, 'package.json'));
  for (const [name, files] of Object.entries(NATIVE_PACKAGES)) {
    if (!names.has(name)) continue;
    const source = dirname(requireFromRoot.resolve(`${name}/package.json`));
    const target = join(outDir, 'node_modules', name);
    for (const file of files) {
      mkdirSync(dirname(join(target, file)), { recursive: true });
      cpSync(join(source, file), join(target, file), { recursive: true });
    }
  }
}

/** Fails the build when `path` holds a non-ASCII character, naming where (see the header). */
function assertAscii(path: string): void {
  const text = readFileSync(path, 'latin1');
  const at = text.search(/[\x80-\xff]/);
  if (at === -1) return;
  const excerpt = text.slice(Math.max(0, at - 80), at + 40).replace(/[^\x20-\x7e]/g, '?');
  throw new Error(
    `${relative(root, path)}: a non-ASCII byte at offset ${String(at)} (V8 would hold the whole bundle as a two-byte string): ...${excerpt}... Escape it in the source (\\u00b5 in a regular expression) or find which dependency brings it.`,
  );
}

async function buildProcess(name: keyof typeof ENTRY_POINTS): Promise<Metafile> {
  const result = await build({
    absWorkingDir: root,
    entryPoints: { [name]: ENTRY_POINTS[name], ...THREAD_ENTRY_POINTS[name] },
    plugins: [requiredBuiltins(REQUIRED_BUILTINS), ...PROCESS_PLUGINS[name]()],
    outdir: outDir,
    bundle: true,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    treeShaking: true,
    sourcemap: 'linked',
    // Source maps point at the repository's files; the sources themselves are not embedded.
    sourcesContent: false,
    external: Object.keys(EXTERNAL),
    // Pick the ES module build of a dependency that ships both, as the compiled code does.
    mainFields: ['module', 'main'],
    banner: { js: BANNER },
    minifyWhitespace: true,
    legalComments: 'linked',
    metafile: true,
    logLevel: 'warning',
  });
  return result.metafile;
}

async function main(): Promise<void> {
  rmSync(outDir, { recursive: true, force: true });
  // One build a process (they share no output), their metafiles merged into one meta.json.
  const metafiles = await Promise.all(selectedProcesses(args.only).map(buildProcess));
  const result = {
    metafile: {
      inputs: Object.assign({}, ...metafiles.map((m) => m.inputs)) as Metafile['inputs'],
      outputs: Object.assign({}, ...metafiles.map((m) => m.outputs)) as Metafile['outputs'],
    },
  };
  for (const file of Object.keys(result.metafile.outputs)) {
    if (file.endsWith('.js')) assertAscii(resolve(root, file));
  }
  // Only the native packages an output really imports: the executor's bundle gets none.
  const imported = new Set(
    Object.values(result.metafile.outputs).flatMap((output) =>
      output.imports.filter((i) => i.external).map((i) => i.path),
    ),
  );
  copyNativePackages(
    new Set(
      Object.entries(EXTERNAL).flatMap(([name, packages]) => (imported.has(name) ? packages : [])),
    ),
  );
  writeFileSync(join(outDir, 'package.json'), `${JSON.stringify({ type: 'module' }, null, 2)}\n`);
  writeFileSync(join(outDir, 'meta.json'), JSON.stringify(result.metafile));
  for (const [file, output] of Object.entries(result.metafile.outputs)) {
    if (!file.endsWith('.js')) continue;
    const modules = Object.keys(output.inputs).length;
    const kib = Math.round(output.bytes / 1024);
    process.stdout.write(
      `${relative(root, file)}: ${String(kib)} KiB, ${String(modules)} modules\n`,
    );
  }
}

await main();
