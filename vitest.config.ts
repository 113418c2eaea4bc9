import { defineConfig } from 'vitest/config';

// Five projects, all run by `npm test`:
//   unit        pure logic and components on real sockets and temp dirs, colocated *.test.ts
//   chart       the real helm binaries over the chart (test/chart)
//   integration the real API server harness, started once for the run (test/integration)
//   security    identities, socket and leak checks (test/security; real API server too)
//   node        the same harness plus a real worker node (containerd, runc, kubelet), the
//               images built with docker and the chart installed for real (test/node; needs root)
//   e2e         the demo gateway's web UI in headless Chromium (test/e2e; needs `chromium`)
export default defineConfig({
  test: {
    reporters: ['default', './test/helpers/summary-reporter.ts'],
    projects: [
      {
        test: {
          name: 'unit',
          include: [
            '{shared,collector,executor,demo-gateway,proto,cli,bench,test/helpers,test/mutation,test/component}/**/*.test.ts',
          ],
          testTimeout: 20_000,
        },
      },
      {
        test: {
          name: 'chart',
          include: ['test/chart/**/*.test.ts'],
          testTimeout: 60_000,
        },
      },
      {
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts'],
          globalSetup: ['./test/cluster/global-setup.ts'],
          // One shared cluster on two cores: files run one after another, each in its own namespace.
          fileParallelism: false,
          testTimeout: 150_000,
          hookTimeout: 120_000,
        },
      },
      {
        test: {
          // npm run test:security runs this project together with the security-relevant files
          // of the unit and chart projects, then two integration files (package.json).
          name: 'security',
          include: ['test/security/**/*.test.ts'],
          globalSetup: ['./test/cluster/global-setup.ts'],
          fileParallelism: false,
          testTimeout: 150_000,
          hookTimeout: 120_000,
        },
      },
      {
        test: {
          name: 'node',
          // The real node, the images built from the Dockerfiles (cached by content key), the
          // chart installed for real (npm run test:images runs only the image and chart files).
          include: ['test/node/**/*.test.ts'],
          // Only this project starts the real node: it needs root and adds about 15-30 s.
          globalSetup: ['./test/node/global-setup.ts'],
          fileParallelism: false,
          testTimeout: 300_000,
          // A cold image build (base, then both images) takes 10-25 min on 2 loaded cores.
          hookTimeout: 1_800_000,
        },
      },
      {
        test: {
          name: 'e2e',
          include: ['test/e2e/**/*.test.ts'],
          // A browser start on two busy cores can take a while; nothing here measures time.
          testTimeout: 120_000,
          hookTimeout: 60_000,
        },
      },
    ],
  },
});
