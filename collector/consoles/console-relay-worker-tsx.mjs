// The console relay thread from the TypeScript sources (under tsx or vitest): tsx's loader for
// this thread, then the thread's module. The bundle and the compiled output start
// console-relay-worker.js directly (console-relay-thread.ts picks).
import { register } from 'tsx/esm/api';

register();
await import('./console-relay-worker.ts');
