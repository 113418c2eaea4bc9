// The demo gateway's HTTP/2 receive windows, raised from the protocol's 64 KiB default.
//
// Why: an agent's HTTP/2 stream may send one window of data per WINDOW_UPDATE it reads, and a
// busy agent on a loaded machine reads one every few tens of milliseconds: at 64 KiB that caps
// what any agent can ship, whatever its own speed (about 1 MB/s on a loaded CI machine, a tenth
// of the pod-logs e2e target). The real gateway (grpc-go) grows its windows to what the link
// carries (BDP estimation, up to 16 MiB); a stand-in that keeps 64 KiB measures the stand-in, not
// the agent. grpc-js offers no server option for it (`grpc-node.flow_control_window` is read by
// clients only), so each new HTTP/2 session gets the larger windows as it opens.
import type { Http2Server, Http2Session } from 'node:http2';
import type { Server } from '@grpc/grpc-js';

/** Per stream: a few 90 KB log batches in flight on one Connect call. */
export const STREAM_WINDOW_BYTES = 4 * 1024 * 1024;
/** Per connection: the largest window grpc-go's BDP estimator grows to. */
export const CONNECTION_WINDOW_BYTES = 16 * 1024 * 1024;

const raised = new WeakSet<Http2Server>();

function raise(session: Http2Session): void {
  session.settings({ initialWindowSize: STREAM_WINDOW_BYTES });
  session.setLocalWindowSize(CONNECTION_WINDOW_BYTES);
}

/**
 * Raises the receive windows of every session the server's listeners open from now on. Call it
 * after each bind. Returns false when grpc-js no longer exposes its HTTP/2 servers where this
 * looks (a test pins it, so an upgrade that moves them fails there, not silently here).
 */
export function raiseReceiveWindows(server: Server): boolean {
  // grpc-js keeps them in a private field; there is no public accessor.
  const servers = (server as unknown as { http2Servers?: unknown }).http2Servers;
  if (!(servers instanceof Map)) return false;
  for (const http2Server of servers.keys() as Iterable<Http2Server>) {
    if (raised.has(http2Server)) continue;
    raised.add(http2Server);
    http2Server.on('session', raise);
  }
  return true;
}
