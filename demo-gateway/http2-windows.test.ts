// The demo gateway's HTTP/2 receive windows, seen by a raw HTTP/2 client: the larger stream
// window in its SETTINGS and the larger connection window after its WINDOW_UPDATE. With the
// protocol's 64 KiB the agent can ship only one window per round trip (http2-windows.ts).
import { connect, type ClientHttp2Session, type Settings } from 'node:http2';
import { once } from 'node:events';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { DemoGateway } from './demo-gateway.js';
import { CONNECTION_WINDOW_BYTES, STREAM_WINDOW_BYTES } from './http2-windows.js';

const cleanup: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const step of cleanup.splice(0).reverse()) await step();
});

describe('demo gateway HTTP/2 windows', () => {
  it('advertises a 4 MiB stream window and opens a 16 MiB connection window to every agent', async () => {
    const gateway = new DemoGateway({}, { logger: pino({ level: 'silent' }) });
    cleanup.push(() => gateway.close());
    const port = await gateway.listen('127.0.0.1', 0);
    const session: ClientHttp2Session = connect(`http://127.0.0.1:${String(port)}`);
    cleanup.push(async () => {
      session.destroy();
      await Promise.resolve();
    });
    await once(session, 'remoteSettings');
    // The server's first SETTINGS carry the defaults, the raised ones follow with the connection's
    // WINDOW_UPDATE: a ping round trip later both have arrived.
    await new Promise<void>((resolve, reject) => {
      session.ping((err) => {
        if (err) reject(err);
        else resolve();
      });
    });
    const settings: Settings = session.remoteSettings;
    expect(settings.initialWindowSize).toBe(STREAM_WINDOW_BYTES);
    expect(session.state.remoteWindowSize).toBe(CONNECTION_WINDOW_BYTES);
  });
});
