// A TCP relay from the real node's side of its veth to the API server on loopback: kwokctl binds
// the control plane to 127.0.0.1, which the node's network namespace cannot reach. Started detached
// by node.ts, stopped with the node (the last argument, the node's directory, names it there).
//   node relay.mjs <listen address> <port> <target address> <target port> <node dir>
import { createConnection, createServer } from 'node:net';
import process from 'node:process';

const [listenAddress, port, targetAddress, targetPort] = process.argv.slice(2);
const server = createServer((client) => {
  const upstream = createConnection({ host: targetAddress, port: Number(targetPort) });
  client.pipe(upstream).pipe(client);
  const close = () => {
    client.destroy();
    upstream.destroy();
  };
  client.on('error', close);
  upstream.on('error', close);
  client.on('close', close);
  upstream.on('close', close);
});
server.listen(Number(port), listenAddress);
server.on('error', (err) => {
  process.stderr.write(`relay: ${err.message}\n`);
  process.exit(1);
});
for (const signal of ['SIGTERM', 'SIGINT']) process.on(signal, () => process.exit(0));
