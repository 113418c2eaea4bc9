// Helpers for tests that talk to the executor's socket the way a compromised collector (or a
// stranger in the Pod) would: raw connections, raw HTTP/2 frames, other users' processes.
import { spawn } from 'node:child_process';
import { connect as http2Connect, type ClientHttp2Session } from 'node:http2';
import { connect, type Socket } from 'node:net';
import { Writable } from 'node:stream';
import { pino, type Logger } from 'pino';

/** A logger whose JSON lines the test can read back. */
export function captureLogger(): { logger: Logger; lines: () => Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      for (const line of chunk.toString('utf8').split('\n')) {
        if (line.trim() !== '') lines.push(JSON.parse(line) as Record<string, unknown>);
      }
      callback();
    },
  });
  return { logger: pino({ level: 'info' }, stream), lines: () => lines };
}

/**
 * Tries to connect to a Unix socket from a child process running as another user (the tests run
 * as root, so setuid is available). Resolves "connected" or the errno code.
 */
export function connectAs(socketPath: string, uid: number, gid: number): Promise<string> {
  const script = `
    const socket = require('node:net').connect(process.argv[1]);
    socket.on('connect', () => { process.stdout.write('connected'); socket.destroy(); });
    socket.on('error', (err) => { process.stdout.write(String(err.code)); });
  `;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['-e', script, socketPath], {
      uid,
      gid,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString('utf8')));
    child.on('error', reject);
    child.on('close', () => {
      if (out === '') reject(new Error(`the child printed nothing: ${err}`));
      else resolve(out);
    });
  });
}

/** An HTTP/2 session over the Unix socket, without gRPC's client in the way. */
export function rawHttp2(socketPath: string): ClientHttp2Session {
  const session = http2Connect('http://executor', { createConnection: () => connect(socketPath) });
  session.on('error', () => undefined);
  return session;
}

/**
 * Starts a gRPC call that declares a message of `declaredBytes` and sends `sentBytes` of it,
 * then stalls: the half-sent large message a hostile client uses to make a server buffer.
 */
export function halfSentMessage(
  session: ClientHttp2Session,
  path: string,
  declaredBytes: number,
  sentBytes: number,
): void {
  const stream = session.request({
    ':method': 'POST',
    ':path': path,
    'content-type': 'application/grpc',
    te: 'trailers',
  });
  stream.on('error', () => undefined);
  const header = Buffer.alloc(5);
  header.writeUInt8(0, 0);
  header.writeUInt32BE(declaredBytes, 1);
  stream.write(header);
  stream.write(Buffer.alloc(sentBytes, 0x61));
}

/** Opens a raw connection that never speaks; `closed` settles when the server ends it. */
export function rawConnection(socketPath: string): { socket: Socket; closed: Promise<void> } {
  const socket = connect(socketPath);
  socket.on('error', () => undefined);
  // Read (and drop) what the server sends, so its end of the connection is seen.
  socket.resume();
  const closed = new Promise<void>((resolve) => {
    socket.once('close', () => {
      resolve();
    });
  });
  return { socket, closed };
}

/** Resident set size of a process in bytes, from /proc. */
export async function rssBytes(pid: number): Promise<number> {
  const { readFile } = await import('node:fs/promises');
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const match = /VmRSS:\s+(\d+) kB/.exec(status);
  if (match?.[1] === undefined) throw new Error(`no VmRSS for pid ${pid}`);
  return Number(match[1]) * 1024;
}
