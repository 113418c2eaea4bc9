// The demo gateway's front-end: Preact components bundled by Vite into dist/demo-ui, which the
// demo gateway serves itself (no CDN). Built by `npm run build:ui` (demo-gateway/ui-build.ts).
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

const root = fileURLToPath(new URL('./ui', import.meta.url));

export default defineConfig({
  root,
  // Relative asset URLs: the page works under any path the gateway serves it from.
  base: './',
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  build: {
    outDir: fileURLToPath(new URL('../dist/demo-ui', import.meta.url)),
    emptyOutDir: true,
    target: 'es2022',
    // One script and one style sheet: the gateway reads them into memory once.
    assetsInlineLimit: 0,
    reportCompressedSize: false,
  },
});
