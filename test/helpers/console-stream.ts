// A console stream straight on the executor's socket, as a (possibly compromised) collector
// holds it: the raw generated client, the output collected in order, and helpers to wait for a
// pattern, an exit or a refusal.
import { credentials, type ClientDuplexStream } from '@grpc/grpc-js';
import {
  ExecutorServiceClient,
  type ConsoleAudit,
  type ConsoleExit,
  type ConsoleOpened,
  type ConsoleRequest,
  type ConsoleResponse,
  type Refusal,
} from '../../proto/index.js';
import type { CommandClaims } from '../../shared/signed-command/claims.js';
import {
  newCommandNonce,
  signCommand,
  type CommandKeyPair,
} from '../../shared/signed-command/sign-command.js';

export interface ConsoleTarget {
  readonly namespace: string;
  readonly pod: string;
  readonly container?: string;
}

/** The platform's signature over a pod console open (what the gateway relays). */
export function signConsoleOpen(
  signer: { readonly key: CommandKeyPair; readonly keyId: string },
  requestId: string,
  target: ConsoleTarget,
  principal = 'alice@example.com',
): string {
  const { key, keyId } = signer;
  const nowSec = Math.floor(Date.now() / 1000);
  const claims: CommandClaims = {
    request_id: requestId,
    principal,
    permission: 'cluster:node_console',
    target: {
      kind: 'pod',
      namespace: target.namespace,
      name: target.pod,
      container: target.container ?? '',
      resource: '',
    },
    verb: 'console',
    iat: nowSec,
    exp: nowSec + 60,
    nonce: newCommandNonce(),
  };
  return signCommand(claims, { keyId, privateKey: key.privateKeyPem });
}

/**
 * The platform's signature over a console re-attach: verb console_attach, bound to the session.
 * `issuedAgoSec` back-dates it (an expired one: more than its 60 s lifetime).
 */
export function signConsoleAttach(
  signer: { readonly key: CommandKeyPair; readonly keyId: string },
  sessionId: string,
  target: ConsoleTarget,
  options: { readonly principal?: string; readonly issuedAgoSec?: number } = {},
): string {
  const { key, keyId } = signer;
  const nowSec = Math.floor(Date.now() / 1000) - (options.issuedAgoSec ?? 0);
  const claims: CommandClaims = {
    request_id: `attach-${newCommandNonce()}`,
    principal: options.principal ?? 'alice@example.com',
    permission: 'cluster:node_console',
    target: {
      kind: 'pod',
      namespace: target.namespace,
      name: target.pod,
      container: target.container ?? '',
      resource: '',
    },
    verb: 'console_attach',
    iat: nowSec,
    exp: nowSec + 60,
    nonce: newCommandNonce(),
    session_id: sessionId,
  };
  return signCommand(claims, { keyId, privateKey: key.privateKeyPem });
}

export class ConsoleStreamClient {
  readonly call: ClientDuplexStream<ConsoleRequest, ConsoleResponse>;
  readonly messages: ConsoleResponse[] = [];
  opened: ConsoleOpened | undefined;
  exit: ConsoleExit | undefined;
  refusal: Refusal | undefined;
  readonly audits: ConsoleAudit[] = [];
  ended = false;
  /** Output bytes in order (stdout and stderr). */
  private outputChunks: Buffer[] = [];
  outputBytes = 0;
  lastSeq = 0;
  /** When set, every chunk's bytes are counted but not kept (large outputs). */
  keepOutput = true;
  /** When true, every chunk is acknowledged as it arrives. */
  autoAck = true;
  private readonly waiters = new Set<() => void>();

  /** `resumeAfter`: the last sequence number held already (a re-attaching stream). */
  constructor(client: ExecutorServiceClient, resumeAfter = 0) {
    this.lastSeq = resumeAfter;
    this.call = client.console();
    this.call.on('data', (message: ConsoleResponse) => {
      this.messages.push(message);
      const output = message.output;
      switch (output?.$case) {
        case 'opened':
          this.opened = output.value;
          break;
        case 'chunk': {
          const seq = Number(output.value.seq);
          if (seq !== this.lastSeq + 1) {
            throw new Error(`chunk ${seq} after ${this.lastSeq}: output out of order`);
          }
          this.lastSeq = seq;
          this.outputBytes += output.value.data.length;
          if (this.keepOutput) this.outputChunks.push(output.value.data);
          if (this.autoAck) this.send({ input: { $case: 'ack', value: String(seq) } });
          break;
        }
        case 'exit':
          this.exit = output.value;
          break;
        case 'refusal':
          this.refusal = output.value;
          break;
        case 'audit':
          this.audits.push(output.value);
          break;
        case undefined:
          break;
      }
      this.wake();
    });
    this.call.on('end', () => {
      this.ended = true;
      this.wake();
    });
    this.call.on('error', () => {
      this.ended = true;
      this.wake();
    });
  }

  private wake(): void {
    for (const waiter of this.waiters) waiter();
  }

  send(message: ConsoleRequest): void {
    if (!this.ended) this.call.write(message);
  }

  stdin(text: string): void {
    this.send({ input: { $case: 'stdin', value: Buffer.from(text) } });
  }

  resize(cols: number, rows: number): void {
    this.send({ input: { $case: 'resize', value: { cols, rows } } });
  }

  ack(seq: number): void {
    this.send({ input: { $case: 'ack', value: String(seq) } });
  }

  output(): string {
    return Buffer.concat(this.outputChunks).toString('utf8');
  }

  /** Waits until `done()` holds, or fails after timeoutMs with what was seen. */
  async until(what: string, done: () => boolean, timeoutMs = 20_000): Promise<void> {
    if (done()) return;
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters.delete(check);
        reject(
          new Error(
            `timed out waiting for ${what} (${this.outputBytes} output bytes, last seq ${this.lastSeq}, stream ended: ${String(this.ended)}); output so far: ${JSON.stringify(this.output().slice(-400))}, refusal: ${JSON.stringify(this.refusal)}, exit: ${JSON.stringify(this.exit)}`,
          ),
        );
      }, timeoutMs);
      const check = () => {
        if (!done()) return;
        clearTimeout(timer);
        this.waiters.delete(check);
        resolve();
      };
      this.waiters.add(check);
    });
  }

  waitForOutput(pattern: RegExp, timeoutMs?: number): Promise<void> {
    return this.until(`output ${String(pattern)}`, () => pattern.test(this.output()), timeoutMs);
  }

  waitForEnd(timeoutMs?: number): Promise<void> {
    return this.until('the end of the stream', () => this.ended, timeoutMs);
  }

  /** Ends the stream without closing the session (a lost collector). */
  cut(): void {
    this.call.cancel();
  }
}

export function consoleClient(socketPath: string): ExecutorServiceClient {
  return new ExecutorServiceClient(`unix://${socketPath}`, credentials.createInsecure());
}
