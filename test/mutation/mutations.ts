// The mutations `npm run test:mutation` applies: each breaks one promise on purpose and names the
// tests that must fail. docs/testing.md says how to add one; the rows of
// docs/testing-mutations.md are transcribed here, one object per row, under the row's heading as
// `area`. Keep `original` to one line of the source, without its indentation, unique in the file.
import type { Mutation } from './mutation.js';

export const MUTATIONS: readonly Mutation[] = [
  // ---- clock: timers that Node would silently shorten ----
  {
    id: 'clock-nan-delay',
    area: 'clock',
    file: 'shared/clock.ts',
    original: 'if (Number.isNaN(ms) || ms <= 0) return 0;',
    replacement: 'if (ms <= 0) return 0;',
    tests: ['shared/clock.test.ts'],
    breaks: 'a NaN delay becomes no delay, not a NaN timer (1 ms in Node)',
    ci: true,
  },
  {
    id: 'clock-no-cap',
    area: 'clock',
    file: 'shared/clock.ts',
    original: 'return Math.min(ms, MAX_TIMER_DELAY_MS);',
    replacement: 'return ms;',
    tests: ['shared/clock.test.ts'],
    breaks: 'a delay above 2^31-1 ms is capped, not turned into 1 ms',
    ci: true,
  },
  {
    id: 'clock-sleep-one-timer',
    area: 'clock',
    file: 'shared/clock.ts',
    original: 'const step = clampTimerDelay(remaining);',
    replacement: 'const step = remaining;',
    tests: ['shared/clock.test.ts'],
    breaks: 'a long sleep is served as capped timers, never as a 1 ms one',
    ci: true,
  },
  // ---- health: probes ----
  {
    id: 'health-degraded-is-ready',
    area: 'health',
    file: 'collector/health/health-server.ts',
    original: "const ready = results.every(([, health]) => health.state === 'ok');",
    replacement: "const ready = results.every(([, health]) => health.state !== 'unhealthy');",
    tests: ['collector/health/health-server.test.ts'],
    breaks: '/readyz is 503 while any component is degraded',
    ci: true,
  },
  {
    id: 'health-hung-check-waits',
    area: 'health',
    file: 'collector/health/health-server.ts',
    original: 'return await Promise.race([Promise.resolve(check.check()), timeout]);',
    replacement: 'return await Promise.resolve(check.check());',
    tests: ['collector/health/health-server.test.ts'],
    breaks: 'a check that hangs answers unhealthy after checkTimeoutMs',
  },
  {
    id: 'health-components-hidden-when-not-ready',
    area: 'health',
    file: 'collector/health/health-server.ts',
    original: 'if (verbose || !ready) {',
    replacement: 'if (verbose) {',
    tests: ['collector/health/health-server.test.ts'],
    breaks: 'a 503 from /readyz names the components that are not ok',
  },
  {
    id: 'health-verbose-false',
    area: 'health',
    file: 'collector/health/health-server.ts',
    original: "request.query.verbose !== undefined && request.query.verbose !== 'false';",
    replacement: 'request.query.verbose !== undefined;',
    tests: ['collector/health/health-server.test.ts'],
    breaks: '/readyz?verbose=false is terse',
  },
  // ---- logging: secrets never reach logs ----
  {
    id: 'logging-tenant-token',
    area: 'logging',
    file: 'shared/logging/create-logger.ts',
    original: "'*.tenantToken',",
    replacement: '',
    tests: ['shared/logging/create-logger.test.ts'],
    breaks: 'a tenant token never reaches a log line',
    ci: true,
  },
  {
    // Not `headers.authorization`: `*.authorization` covers it too (an equivalent mutation).
    id: 'logging-bearer-token',
    area: 'logging',
    file: 'shared/logging/create-logger.ts',
    original: "'*.bearerToken',",
    replacement: '',
    tests: ['shared/logging/create-logger.test.ts'],
    breaks: "a kubeconfig user's bearer token never reaches a log line",
  },
  // ---- lifecycle: start in order, close in reverse ----
  {
    id: 'lifecycle-close-in-start-order',
    area: 'lifecycle',
    file: 'shared/lifecycle/service.ts',
    original: 'for (const service of [...started].reverse()) {',
    replacement: 'for (const service of started) {',
    tests: ['shared/lifecycle/service.test.ts'],
    breaks: 'services close in reverse start order',
    ci: true,
  },
  {
    id: 'lifecycle-failed-start-leaks',
    area: 'lifecycle',
    file: 'shared/lifecycle/service.ts',
    original: 'await closeAll().catch(() => undefined);',
    replacement: '',
    tests: ['shared/lifecycle/service.test.ts'],
    breaks: 'a failed start closes what already started',
  },
  {
    id: 'lifecycle-close-stops-at-first-error',
    area: 'lifecycle',
    file: 'shared/lifecycle/service.ts',
    original: 'errors.push(err);',
    replacement: 'throw err;',
    tests: ['shared/lifecycle/service.test.ts'],
    breaks: 'one close that throws does not keep the others open',
  },
];
