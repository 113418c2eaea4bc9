// `npm run build:ui`: bundles the demo gateway's front-end (demo-gateway/ui) into dist/demo-ui.
import { buildUi, UI_OUT_DIR } from '../demo-gateway/ui-build.js';

await buildUi();
process.stdout.write(`demo UI built into ${UI_OUT_DIR}\n`);
