// Builds the agent images (or finds them cached) outside vitest: `.ci/run` starts it beside the
// test cluster's build.sh, so that the image build's downloads (debootstrap, npm ci in the build
// stage) overlap the Go compiles; the node tests then find both images cached by content key.
import { buildAgentImages } from './images.js';

const started = Date.now();
const images = await buildAgentImages((line) => {
  process.stderr.write(`images: ${line}\n`);
});
const seconds = (ms: number) => `${String(Math.round(ms / 1000))}s`;
const steps = Object.entries(images.timings).map(([step, ms]) => `${step} ${seconds(ms)}`);
process.stderr.write(
  `images: ready in ${seconds(Date.now() - started)}${steps.length > 0 ? ` (${steps.join(', ')})` : ' (cached)'}\n`,
);
