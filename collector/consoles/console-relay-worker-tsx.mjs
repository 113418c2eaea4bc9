// The console relay thread from the TypeScript sources (under tsx or vitest): tsx's loader for
// this thread (under vitest the thread has none; under `node --import tsx` it inherits that one
// too, and a second registration is harmless), then the thread's module. The bundle and the
// compiled output start console-relay-worker.js directly (console-relay-thread.ts picks).
import { register } from 'tsx/esm/api';

register();
await import('./console-relay-worker.ts');
