// The demo gateway's consoles: it asks an agent for a console on Connect (console_open, signed
// with the demo's own key), accepts the agent's Console call for it, acknowledges output, keeps a
// bounded transcript for the page, and re-attaches after a lost call (console_attach from the last
// sequence number held). Tests and the page drive consoles through this module.
import { randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import type { ServerDuplexStream } from '@grpc/grpc-js';
import type {
  AuditRecord,
  ConsoleAgentFrame,
  ConsoleExitEvent,
  ConsoleGatewayFrame,
  ConsoleOpenedEvent,
  ConsoleRefusal,
  GatewayMessage,
} from '../proto/index.js';
import type { CommandSigner } from './command-signer.js';
import { signNodeConsoleOpen } from './node-console-routes.js';

type ConsoleServerCall = ServerDuplexStream<ConsoleAgentFrame, ConsoleGatewayFrame>;

/** Sends a payload on an agent's Connect stream; false when that session is gone. */
export type SendToAgent = (
  sessionId: string,
  payload: NonNullable<GatewayMessage['payload']>,
) => boolean;

export interface ConsoleSpec {
  readonly namespace: string;
  readonly pod: string;
  readonly container?: string;
  readonly command?: readonly string[];
  readonly tty?: boolean;
  readonly cols?: number;
  readonly rows?: number;
  readonly principal?: string;
  /** A node console on this node (namespace and pod are then empty). */
  readonly node?: string;
}

export type ConsoleState = 'opening' | 'open' | 'detached' | 'ended' | 'refused';

/** Transcript kept per console for the page; older output is cut (the terminal has it). */
const MAX_TRANSCRIPT_BYTES = 1024 * 1024;

export interface ConsoleView {
  readonly id: string;
  readonly agentSession: string;
  readonly spec: ConsoleSpec;
  readonly state: ConsoleState;
  readonly opened: ConsoleOpenedEvent | undefined;
  readonly exit: ConsoleExitEvent | undefined;
  readonly refusal: ConsoleRefusal | undefined;
  readonly lastSeq: number;
}

/** One console as the gateway holds it. Events: `output` (Buffer, seq), `change`. */
export class DemoConsole extends EventEmitter<{ output: [Buffer, number]; change: [] }> {
  readonly id = randomUUID();
  readonly spec: ConsoleSpec;
  agentSession: string;
  state: ConsoleState = 'opening';
  opened: ConsoleOpenedEvent | undefined;
  exit: ConsoleExitEvent | undefined;
  refusal: ConsoleRefusal | undefined;
  lastSeq = 0;
  /** Output chunks in order with their sequence numbers (bounded). */
  readonly transcript: { seq: number; data: Buffer }[] = [];
  #transcriptBytes = 0;
  #call: ConsoleServerCall | undefined;
  /** A size asked for before the call arrived: sent when it binds. */
  #pendingSize: { cols: number; rows: number } | undefined;
  #readingPaused = false;
  /** An open or attach was asked for and its call has not arrived yet. */
  #awaitingCall = true;
  /** cut() came while the call was awaited: the call is ended as soon as it arrives. */
  #cutBeforeCall = false;
  /** An exit that arrived before the output it counts (its last_seq): applied when that has. */
  #pendingExit: ConsoleExitEvent | undefined;
  /** Output chunks received twice (a replay overlapping what was held): must stay 0. */
  duplicates = 0;

  constructor(spec: ConsoleSpec, agentSession: string) {
    super();
    this.spec = spec;
    this.agentSession = agentSession;
  }

  view(): ConsoleView {
    return {
      id: this.id,
      agentSession: this.agentSession,
      spec: this.spec,
      state: this.state,
      opened: this.opened,
      exit: this.exit,
      refusal: this.refusal,
      lastSeq: this.lastSeq,
    };
  }

  /** Output after `seq` still in the transcript. */
  outputAfter(seq: number): { seq: number; data: Buffer }[] {
    return this.transcript.filter((chunk) => chunk.seq > seq);
  }

  text(): string {
    return Buffer.concat(this.transcript.map((chunk) => chunk.data)).toString('utf8');
  }

  stdin(data: Buffer | string): boolean {
    return this.#send({
      frame: { $case: 'stdin', value: Buffer.isBuffer(data) ? data : Buffer.from(data) },
    });
  }

  /**
   * Sends the terminal's size. Asked before the agent's call arrived (the page sizes its
   * terminal as soon as it opens), the last size is kept and sent when the call binds: else the
   * process would start at the open's size, not the one the page shows.
   */
  resize(cols: number, rows: number): boolean {
    if (this.#call === undefined) {
      this.#pendingSize = { cols, rows };
      return false;
    }
    return this.#send({ frame: { $case: 'resize', value: { cols, rows } } });
  }

  close(reason = 'closed from the demo gateway'): boolean {
    return this.#send({ frame: { $case: 'close', value: reason } });
  }

  /**
   * Ends the call from the gateway's side, as a lost network would (the session lives on). Before
   * the agent's call has arrived (the console still opening, or re-attaching), that call is ended
   * as soon as it arrives: else it would bind as if nothing happened and the console would run on.
   */
  cut(): void {
    const call = this.#call;
    this.#call = undefined;
    if (call === undefined && this.#awaitingCall) this.#cutBeforeCall = true;
    call?.end();
    if (this.state === 'open' || this.state === 'opening') this.#setState('detached');
  }

  /** @internal an attach was asked for: its call is awaited (a cut before it ends it). */
  awaitCall(): void {
    this.#awaitingCall = true;
    this.#cutBeforeCall = false;
  }

  /**
   * Stops reading the agent's call, as a gateway whose client lags would: nothing more is
   * received or acknowledged until resumeReading(), so HTTP/2 flow control and the agent's output
   * window must hold the rest back.
   */
  pauseReading(): void {
    this.#readingPaused = true;
    this.#call?.pause();
  }

  resumeReading(): void {
    this.#readingPaused = false;
    this.#call?.resume();
  }

  #send(frame: ConsoleGatewayFrame): boolean {
    if (this.#call === undefined) return false;
    this.#call.write(frame);
    return true;
  }

  #setState(state: ConsoleState): void {
    this.state = state;
    this.emit('change');
  }

  /** @internal the agent's call for this console arrived; false when it was cut (and ended). */
  bind(call: ConsoleServerCall): boolean {
    this.#awaitingCall = false;
    if (this.#cutBeforeCall) {
      this.#cutBeforeCall = false;
      call.on('data', () => undefined);
      call.end();
      return false;
    }
    this.#call = call;
    const size = this.#pendingSize;
    this.#pendingSize = undefined;
    if (size !== undefined) this.#send({ frame: { $case: 'resize', value: size } });
    if (this.#readingPaused) call.pause();
    call.on('data', (frame: ConsoleAgentFrame) => {
      this.#onFrame(frame);
    });
    const lost = () => {
      if (this.#call !== call) return;
      this.#call = undefined;
      if (this.state === 'open' || this.state === 'opening') this.#setState('detached');
    };
    call.on('end', () => {
      lost();
      call.end();
    });
    call.on('error', lost);
    call.on('cancelled', lost);
    return true;
  }

  /**
   * The exit names the last output's sequence number: output the agent's window still held when
   * the process ended comes after the exit. The console ends once all of it is here.
   */
  #endWhenComplete(): void {
    const exit = this.#pendingExit;
    if (exit === undefined || this.lastSeq < Number(exit.lastSeq)) return;
    this.#pendingExit = undefined;
    this.exit = exit;
    this.#setState('ended');
  }

  #onFrame(frame: ConsoleAgentFrame): void {
    const value = frame.frame;
    switch (value?.$case) {
      case 'opened':
        this.opened = value.value;
        this.#setState('open');
        return;
      case 'output': {
        const seq = Number(value.value.seq);
        if (seq <= this.lastSeq) {
          this.duplicates += 1;
          return;
        }
        this.lastSeq = seq;
        this.transcript.push({ seq, data: value.value.data });
        this.#transcriptBytes += value.value.data.length;
        while (this.#transcriptBytes > MAX_TRANSCRIPT_BYTES && this.transcript.length > 1) {
          this.#transcriptBytes -= this.transcript.shift()?.data.length ?? 0;
        }
        // The gateway holds it: the agent may forget it (and its output window reopens).
        this.#send({ frame: { $case: 'ack', value: String(seq) } });
        this.emit('output', value.value.data, seq);
        this.#endWhenComplete();
        return;
      }
      case 'exit':
        this.#pendingExit = value.value;
        this.#endWhenComplete();
        return;
      case 'refusal':
        this.refusal = value.value;
        this.#setState('refused');
        return;
      case undefined:
        return;
    }
  }
}

export class ConsoleHub {
  readonly #consoles = new Map<string, DemoConsole>();
  /** Request id of a pending open or attach -> its console. */
  readonly #pending = new Map<string, DemoConsole>();
  readonly #signer: CommandSigner;
  readonly #send: SendToAgent;
  /** Audit records received (newest last, bounded). */
  readonly audits: AuditRecord[] = [];
  /** Nodes where no process runs (kwok's simulated nodes in the demo): no console opens there. */
  readonly #simulatedNodes = new Set<string>();

  constructor(signer: CommandSigner, send: SendToAgent) {
    this.#signer = signer;
    this.#send = send;
  }

  /** Names nodes that only simulate pods (kwok): the page explains instead of offering them. */
  markSimulatedNodes(names: Iterable<string>): void {
    for (const name of names) this.#simulatedNodes.add(name);
  }

  /** Why a console cannot open on a pod of `node`, or undefined when it can. */
  unavailableOn(node: string): string | undefined {
    if (!this.#simulatedNodes.has(node)) return undefined;
    return (
      `${node} is a simulated (kwok) node: no container process runs there, so pods/exec ` +
      'cannot start (it would fail as EXEC_FAILED). Pick a pod on a real node.'
    );
  }

  list(): DemoConsole[] {
    return [...this.#consoles.values()];
  }

  get(id: string): DemoConsole | undefined {
    return this.#consoles.get(id);
  }

  /** Asks the agent of `agentSession` for a console; the call arrives on accept(). */
  open(agentSession: string, spec: ConsoleSpec): DemoConsole {
    const console = new DemoConsole(spec, agentSession);
    this.#consoles.set(console.id, console);
    const requestId = randomUUID();
    const principal = spec.principal ?? 'demo-user@example.com';
    const container = spec.container ?? '';
    this.#pending.set(requestId, console);
    const sent = this.#send(agentSession, {
      $case: 'consoleOpen',
      value: {
        requestId,
        principal,
        namespace: spec.namespace,
        pod: spec.pod,
        container,
        command: [...(spec.command ?? [])],
        tty: spec.tty ?? true,
        cols: spec.cols ?? 80,
        rows: spec.rows ?? 24,
        node: spec.node ?? '',
        signedCommand:
          spec.node === undefined || spec.node === ''
            ? this.#signer.signConsoleOpen(requestId, principal, {
                namespace: spec.namespace,
                pod: spec.pod,
                container,
              })
            : signNodeConsoleOpen(this.#signer, requestId, principal, spec.node),
      },
    });
    if (!sent) {
      this.#pending.delete(requestId);
      console.refusal = { code: 'AGENT_UNAVAILABLE', reason: 'the agent session is gone' };
      console.state = 'refused';
    }
    return console;
  }

  /** Re-attaches a detached console through `agentSession` (the same or a new agent session). */
  reattach(console: DemoConsole, agentSession: string): boolean {
    const opened = console.opened;
    if (opened === undefined) return false;
    console.agentSession = agentSession;
    console.awaitCall();
    const requestId = randomUUID();
    this.#pending.set(requestId, console);
    return this.#send(agentSession, {
      $case: 'consoleAttach',
      value: {
        requestId,
        sessionId: opened.sessionId,
        resumeAfter: String(console.lastSeq),
        // Every attach is signed afresh, bound to this session (the executor refuses a bare id).
        signedCommand: this.#signer.signConsoleAttach(
          requestId,
          opened.principal,
          opened.sessionId,
          // The container the executor resolved: the session's target, as it checks it.
          { namespace: console.spec.namespace, pod: console.spec.pod, container: opened.container },
        ),
      },
    });
  }

  /** An agent's Console call: its first frame names the request it answers. */
  accept(call: ConsoleServerCall): void {
    call.once('data', (frame: ConsoleAgentFrame) => {
      const console = this.#pending.get(frame.requestId);
      if (console === undefined) {
        call.end();
        return;
      }
      this.#pending.delete(frame.requestId);
      // The first frame may already carry a payload (not for a call cut before it arrived).
      if (console.bind(call) && frame.frame !== undefined) call.emit('data', frame);
    });
    call.on('error', () => undefined);
  }

  recordAudit(record: AuditRecord): void {
    this.audits.push(record);
    if (this.audits.length > 500) this.audits.shift();
  }
}
