// Preloaded (with --expose-gc) into a process whose memory a test bounds: a young-generation
// collection every FORCE_GC_INTERVAL_MS, so the process's RSS shows what it holds rather than how
// long V8 lets dead Buffers pile up (their memory is freed only by a collection, and a process
// that allocates little on its own heap collects rarely). Minor collections only: a full one of
// a tsx-loaded heap every 50 ms would starve the process on a loaded machine.
const FORCE_GC_INTERVAL_MS = 50;
const gc = globalThis.gc;
if (typeof gc === 'function') {
  globalThis.setInterval(() => gc({ type: 'minor' }), FORCE_GC_INTERVAL_MS).unref();
}
