// A rate-limited log writer, run as its own process by the pod-logs-e2e bench so its CPU is
// nobody's figure: appends CRI lines (`<RFC3339Nano> stdout F <message>\n`) to a file that kwok
// follows, at a fixed rate, in small writes every TICK_MS, from when it prints `{"started":true}`
// until SIGTERM; then prints `{"written":N}` and exits. Every line the API server returns for it (`<timestamp> <message>\n`)
// is `lineBytes` long.
//
//   node --import tsx bench/log-writer.ts <file> <lines per second> <line bytes> <tag>
import { closeSync, openSync, writeSync } from 'node:fs';
import { performance } from 'node:perf_hooks';

const TICK_MS = 5;

const [file, rateText, bytesText, tag] = process.argv.slice(2);
const linesPerSecond = Number(rateText);
const lineBytes = Number(bytesText);
if (file === undefined || tag === undefined || !(linesPerSecond > 0) || !(lineBytes > 60))
  throw new Error('usage: log-writer.ts <file> <lines per second> <line bytes> <tag>');

const fd = openSync(file, 'a');
let written = 0;
let stopping = false;

/** `2026-01-02T03:04:05.123456781Z`: nanoseconds never end in 0, so all nine digits stay. */
function stamp(ms: number, seq: number): string {
  const iso = new Date(ms).toISOString();
  const nanos = (ms % 1000) * 1_000_000 + (seq % 100_000) * 10 + 1;
  return `${iso.slice(0, 19)}.${String(nanos).padStart(9, '0')}Z`;
}

function line(seq: number, ms: number): string {
  const at = stamp(ms, seq);
  const head = `${tag} line ${String(seq).padStart(9, '0')} level=info msg="request handled" `;
  return `${at} stdout F ${head.padEnd(lineBytes - at.length - 2, 'x')}\n`;
}

const started = performance.now();
process.stdout.write(`${JSON.stringify({ started: true })}\n`);
const timer = setInterval(() => {
  if (stopping) return;
  const due = Math.floor(((performance.now() - started) / 1000) * linesPerSecond);
  if (due <= written) return;
  const now = Date.now();
  let text = '';
  for (let seq = written; seq < due; seq++) text += line(seq, now);
  writeSync(fd, text);
  written = due;
}, TICK_MS);

process.once('SIGTERM', () => {
  stopping = true;
  clearInterval(timer);
  closeSync(fd);
  process.stdout.write(`${JSON.stringify({ written })}\n`);
  process.exit(0);
});
