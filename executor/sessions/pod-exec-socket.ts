// One `pods/exec` connection over WebSocket with the executor's own identity: the Kubernetes
// channel protocol (v5.channel.k8s.io where the API server offers it, v4 otherwise), written here
// rather than through client-node's Exec so that flow control (pause the socket while the consumer
// lags), the v5 stdin half-close and the refusal from the upgrade response are ours to control.
import type { IncomingMessage } from 'node:http';
import type { KubeConfig } from '@kubernetes/client-node';
import WebSocket from 'ws';

/** Channel bytes of the Kubernetes remotecommand protocol (anchors D.2). */
const CHANNEL = { stdin: 0, stdout: 1, stderr: 2, status: 3, resize: 4, close: 255 } as const;

export const EXEC_PROTOCOLS = ['v5.channel.k8s.io', 'v4.channel.k8s.io'] as const;
export type ExecProtocol = (typeof EXEC_PROTOCOLS)[number];

export interface PodExecTarget {
  readonly namespace: string;
  readonly pod: string;
  readonly container: string;
  readonly command: readonly string[];
  readonly tty: boolean;
}

/** How the process ended, from the status channel; `exitCode` -1 when it gave none. */
export interface PodExecEnd {
  readonly exitCode: number;
  /** The status channel's message, or why the connection ended without one. */
  readonly message: string;
  /** false when the connection ended without a status (the process may still run). */
  readonly statusReceived: boolean;
}

export type PodExecFailureCode = 'RBAC_DENIED' | 'NOT_FOUND' | 'EXEC_FAILED';

/** The upgrade was refused or failed; `code` maps to a refusal. */
export class PodExecError extends Error {
  readonly code: PodExecFailureCode;

  constructor(code: PodExecFailureCode, message: string) {
    super(message);
    this.code = code;
    this.name = 'PodExecError';
  }
}

export interface PodExecHandlers {
  /** stdout (1) or stderr (2) bytes, in order. */
  onOutput(stream: 1 | 2, data: Buffer): void;
  /** Called once, when the connection is over. */
  onEnd(end: PodExecEnd): void;
}

export interface PodExecConnection {
  readonly protocol: ExecProtocol;
  /** Queues stdin; false when the socket's send buffer is above its mark (the caller may wait). */
  writeStdin(data: Buffer): boolean;
  /** Ends stdin: v5 half-closes it; v4 cannot, so it does nothing there (see docs/consoles.md). */
  closeStdin(): void;
  resize(cols: number, rows: number): void;
  /** Stops reading from the API server (TCP backpressure reaches the kubelet). */
  pause(): void;
  resume(): void;
  /** Closes the connection; the caller ends the process first (see anchors D.2: close alone does not). */
  close(): void;
  /** Bytes queued to the API server and not yet written to the socket. */
  bufferedAmount(): number;
}

/** Above this, the upgrade response body is cut (it is only read for the refusal's reason). */
const MAX_REFUSAL_BODY = 4096;

export async function openPodExec(
  kube: KubeConfig,
  target: PodExecTarget,
  handlers: PodExecHandlers,
  options: { readonly signal?: AbortSignal; readonly connectTimeoutMs?: number } = {},
): Promise<PodExecConnection> {
  const server = kube.getCurrentCluster()?.server;
  if (server === undefined) throw new PodExecError('EXEC_FAILED', 'no cluster in the kubeconfig');
  const query = new URLSearchParams();
  for (const arg of target.command) query.append('command', arg);
  if (target.container !== '') query.set('container', target.container);
  query.set('stdin', 'true');
  query.set('stdout', 'true');
  // With a TTY the runtime merges stderr into stdout; asking for both is refused by the kubelet.
  query.set('stderr', target.tty ? 'false' : 'true');
  query.set('tty', target.tty ? 'true' : 'false');
  const path = `/api/v1/namespaces/${encodeURIComponent(target.namespace)}/pods/${encodeURIComponent(target.pod)}/exec?${query.toString()}`;
  const url = server.replace(/^http/, 'ws') + path;
  const wsOptions: WebSocket.ClientOptions = {
    handshakeTimeout: options.connectTimeoutMs ?? 15_000,
    // Frames are small; a bound keeps a hostile or broken API server from sending huge ones.
    maxPayload: 4 * 1024 * 1024,
    perMessageDeflate: false,
  };
  await kube.applyToHTTPSOptions(wsOptions);
  const socket = new WebSocket(url, [...EXEC_PROTOCOLS], wsOptions);

  await new Promise<void>((resolve, reject) => {
    const abort = () => {
      socket.terminate();
      reject(new PodExecError('EXEC_FAILED', 'cancelled before the exec connection opened'));
    };
    options.signal?.addEventListener('abort', abort, { once: true });
    socket.once('open', () => {
      options.signal?.removeEventListener('abort', abort);
      resolve();
    });
    let refused = false;
    socket.once('unexpected-response', (_request, response: IncomingMessage) => {
      // The answer to the upgrade is the refusal; the socket's own error that follows is not.
      refused = true;
      options.signal?.removeEventListener('abort', abort);
      readRefusal(response)
        .then((error) => {
          reject(error);
        })
        .catch(reject)
        .finally(() => {
          socket.terminate();
        });
    });
    socket.on('error', (err) => {
      if (refused) return;
      options.signal?.removeEventListener('abort', abort);
      reject(new PodExecError('EXEC_FAILED', `exec connection failed: ${err.message}`));
    });
  });

  const protocol: ExecProtocol =
    socket.protocol === 'v5.channel.k8s.io' ? 'v5.channel.k8s.io' : 'v4.channel.k8s.io';
  let ended = false;
  let status: PodExecEnd | undefined;
  const finish = (end: PodExecEnd) => {
    if (ended) return;
    ended = true;
    handlers.onEnd(end);
  };
  socket.on('message', (data: WebSocket.RawData, isBinary: boolean) => {
    const frame = toBuffer(data);
    if (frame.length === 0) return;
    // v4+ frames are binary; a text frame would be the base64 protocol, never negotiated here.
    if (!isBinary) return;
    const channel = frame[0];
    const payload = frame.subarray(1);
    if (channel === CHANNEL.stdout || channel === CHANNEL.stderr) {
      if (payload.length > 0) handlers.onOutput(channel, payload);
    } else if (channel === CHANNEL.status) {
      status = parseStatus(payload);
    }
  });
  socket.on('close', (code: number, reason: Buffer) => {
    finish(
      status ?? {
        exitCode: -1,
        statusReceived: false,
        message: `the exec connection closed without a status (WebSocket ${code}${reason.length > 0 ? `: ${reason.toString('utf8')}` : ''})`,
      },
    );
  });

  const send = (channel: number, data: Buffer): boolean => {
    if (socket.readyState !== WebSocket.OPEN) return false;
    socket.send(Buffer.concat([Buffer.from([channel]), data]), { binary: true });
    return socket.bufferedAmount < 256 * 1024;
  };

  return {
    protocol,
    writeStdin: (data) => send(CHANNEL.stdin, data),
    closeStdin() {
      if (protocol === 'v5.channel.k8s.io') send(CHANNEL.close, Buffer.from([CHANNEL.stdin]));
    },
    resize(cols, rows) {
      send(CHANNEL.resize, Buffer.from(JSON.stringify({ Width: cols, Height: rows })));
    },
    pause: () => {
      socket.pause();
    },
    resume: () => {
      socket.resume();
    },
    close() {
      if (socket.readyState === WebSocket.OPEN) socket.close(1000);
      else socket.terminate();
      // A server that never answers the close frame does not hold the session.
      setTimeout(() => {
        socket.terminate();
      }, 5000).unref();
    },
    bufferedAmount: () => socket.bufferedAmount,
  };
}

function toBuffer(data: WebSocket.RawData): Buffer {
  if (Buffer.isBuffer(data)) return data;
  if (Array.isArray(data)) return Buffer.concat(data);
  return Buffer.from(data);
}

/** The status channel's metav1.Status: Success, or NonZeroExitCode with the code in its causes. */
export function parseStatus(payload: Buffer): PodExecEnd {
  let value: unknown;
  try {
    value = JSON.parse(payload.toString('utf8'));
  } catch {
    return { exitCode: -1, statusReceived: true, message: 'the status channel sent no JSON' };
  }
  const record = (value ?? {}) as {
    status?: string;
    reason?: string;
    message?: string;
    details?: { causes?: { reason?: string; type?: string; message?: string }[] };
  };
  if (record.status === 'Success') return { exitCode: 0, statusReceived: true, message: 'exited' };
  // metav1.StatusCause's JSON key is "reason" (CauseType in Go); "type" is accepted too.
  const cause = record.details?.causes?.find((c) => (c.reason ?? c.type) === 'ExitCode');
  const code = cause?.message === undefined ? Number.NaN : Number(cause.message);
  if (record.reason === 'NonZeroExitCode' && Number.isInteger(code)) {
    return { exitCode: code, statusReceived: true, message: `exited with status ${code}` };
  }
  return {
    exitCode: -1,
    statusReceived: true,
    message: (record.message ?? 'the exec failed').slice(0, 400),
  };
}

/** What a non-101 answer to the upgrade means: 403 is the executor's RBAC, 404 a missing pod. */
async function readRefusal(response: IncomingMessage): Promise<PodExecError> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of response) {
    const buffer = chunk as Buffer;
    if (size < MAX_REFUSAL_BODY) chunks.push(buffer);
    size += buffer.length;
  }
  let message = Buffer.concat(chunks).toString('utf8').slice(0, MAX_REFUSAL_BODY);
  try {
    const parsed = (JSON.parse(message) as { message?: unknown }).message;
    if (typeof parsed === 'string') message = parsed;
  } catch {
    // a plain-text body is its own message
  }
  const status = response.statusCode ?? 0;
  const text = `the API server answered ${status}: ${message.trim().slice(0, 400)}`;
  if (status === 401 || status === 403) return new PodExecError('RBAC_DENIED', text);
  if (status === 404) return new PodExecError('NOT_FOUND', text);
  if (status === 400 && /container .* (?:is not valid|not found)/i.test(message)) {
    return new PodExecError('NOT_FOUND', text);
  }
  return new PodExecError('EXEC_FAILED', text);
}
