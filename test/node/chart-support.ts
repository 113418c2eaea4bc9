// What test/node/chart-install.test.ts needs to drive the chart on the real node and to look from
// inside its containers. The images hold no shell: every look from inside is a `node -e` script run
// by `kubectl exec` in that container, under that container's user, with that container's mounts.
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { request } from 'node:https';
import { promisify } from 'node:util';
import type { KubeConfig } from '@kubernetes/client-node';

const execFileAsync = promisify(execFile);

/** Where Kubernetes clients find their in-cluster token (the chart mounts each container's here). */
export const TOKEN_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

export type Kubectl = (args: readonly string[]) => Promise<string>;

export function kubectlFor(binary: string, kubeconfigPath: string): Kubectl {
  return async (args) => {
    try {
      const { stdout } = await execFileAsync(binary, ['--kubeconfig', kubeconfigPath, ...args], {
        maxBuffer: 64 * 1024 * 1024,
      });
      return stdout;
    } catch (err: unknown) {
      const stderr = (err as { stderr?: string }).stderr ?? '';
      throw new Error(`kubectl ${args.join(' ')} failed:\n${stderr}`, { cause: err });
    }
  };
}

/** Runs a `node -e` script in one container of a Pod; resolves its stdout. */
export function inContainer(
  kubectl: Kubectl,
  { namespace, pod, container }: { namespace: string; pod: string; container: string },
  script: string,
): Promise<string> {
  return kubectl(['exec', '-n', namespace, pod, '-c', container, '--', 'node', '-e', script]);
}

/** Prints this container's own token file. */
export const READ_OWN_TOKEN = `process.stdout.write(require('fs').readFileSync('${TOKEN_DIR}/token', 'utf8'))`;

/**
 * A SelfSubjectReview with this container's token, to the API server through the `kubernetes`
 * Service, trusting the ca.crt beside the token (as in-cluster clients do). Prints
 * {status, username}.
 */
export const SELF_SUBJECT_REVIEW = `
const fs = require('fs');
const https = require('https');
const dir = '${TOKEN_DIR}';
const req = https.request({
  host: process.env.KUBERNETES_SERVICE_HOST,
  port: process.env.KUBERNETES_SERVICE_PORT,
  path: '/apis/authentication.k8s.io/v1/selfsubjectreviews',
  method: 'POST',
  ca: fs.readFileSync(dir + '/ca.crt'),
  headers: {
    authorization: 'Bearer ' + fs.readFileSync(dir + '/token', 'utf8').trim(),
    'content-type': 'application/json',
  },
}, (res) => {
  let body = '';
  res.on('data', (chunk) => (body += chunk));
  res.on('end', () => {
    const username = res.statusCode === 201 ? JSON.parse(body).status.userInfo.username : null;
    console.log(JSON.stringify({ status: res.statusCode, username }));
  });
});
req.end(JSON.stringify({ apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' }));
`;

/**
 * Reads every regular file this container's user can read (all of /, except the kernel's /proc,
 * /sys and /dev) and prints, for every JWT-shaped string found, its file and sha256; plus how many
 * files it read and how many it was denied. The test compares the hashes with the executor's token,
 * so the token itself never enters the collector container.
 */
export const SCAN_READABLE_JWTS = `
const fs = require('fs');
const crypto = require('crypto');
const found = [];
let read = 0;
let denied = 0;
const walk = (dir) => {
  let entries;
  try { entries = fs.readdirSync(dir, { withFileTypes: true }); } catch { denied++; return; }
  for (const entry of entries) {
    const path = (dir === '/' ? '' : dir) + '/' + entry.name;
    if (['/proc', '/sys', '/dev'].includes(path)) continue;
    if (entry.isDirectory()) { walk(path); continue; }
    if (!entry.isFile()) continue;
    let text;
    try { text = fs.readFileSync(path).toString('latin1'); read++; } catch { denied++; continue; }
    for (const jwt of text.match(/eyJ[\\w-]+\\.eyJ[\\w-]+\\.[\\w-]+/g) ?? []) {
      found.push({ path, sha256: crypto.createHash('sha256').update(jwt).digest('hex') });
    }
  }
};
walk('/');
console.log(JSON.stringify({ read, denied, found }));
`;

/** Prints owner, group and mode of the executor's socket directory and socket. */
export function statSocket(socketPath: string): string {
  return `
const fs = require('fs');
const describe = (path) => {
  const s = fs.statSync(path);
  return { socket: s.isSocket(), uid: s.uid, gid: s.gid, mode: (s.mode & 0o7777).toString(8) };
};
console.log(JSON.stringify({
  dir: describe(require('path').dirname('${socketPath}')),
  socket: describe('${socketPath}'),
}));
`;
}

/**
 * One unary gRPC call, GetCapabilities, over the Unix socket with Node's own HTTP/2 client (the
 * image ships no gRPC library outside its bundle): a 5-byte gRPC frame around the protobuf
 * GetCapabilitiesRequest{request_id}. Prints the grpc-status and the response message in base64.
 */
export function getCapabilitiesCall(socketPath: string): string {
  return `
const http2 = require('http2');
const net = require('net');
const session = http2.connect('http://localhost', {
  createConnection: () => net.connect('${socketPath}'),
});
const call = session.request({
  ':method': 'POST',
  ':path': '/executor.v1.ExecutorService/GetCapabilities',
  'content-type': 'application/grpc',
  te: 'trailers',
});
const id = Buffer.from('chart-install-test');
const message = Buffer.concat([Buffer.from([0x0a, id.length]), id]);
const frame = Buffer.alloc(5);
frame.writeUInt32BE(message.length, 1);
const chunks = [];
let status = null;
call.on('response', (headers) => { status = headers['grpc-status'] ?? status; });
call.on('trailers', (trailers) => { status = trailers['grpc-status'] ?? status; });
call.on('data', (chunk) => chunks.push(chunk));
call.on('end', () => {
  console.log(JSON.stringify({ status, message: Buffer.concat(chunks).subarray(5).toString('base64') }));
  session.close();
});
call.end(Buffer.concat([frame, message]));
`;
}

export function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/** The claims of a JWT (not verified: the API server's answer is what the tests trust). */
export function jwtClaims(token: string): Record<string, unknown> {
  const payload = token.split('.')[1] ?? '';
  return JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as Record<string, unknown>;
}

/**
 * A SelfSubjectReview with a bearer token, from the test process straight to the API server:
 * 201 and the username while the token is alive, 401 once it is not.
 */
export function reviewToken(
  kc: KubeConfig,
  token: string,
): Promise<{ status: number; username: string | null }> {
  const cluster = kc.getCurrentCluster();
  if (cluster === null) throw new Error('kubeconfig has no current cluster');
  const ca =
    cluster.caData !== undefined
      ? Buffer.from(cluster.caData, 'base64')
      : readFileSync(cluster.caFile ?? '');
  const url = new URL('/apis/authentication.k8s.io/v1/selfsubjectreviews', cluster.server);
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method: 'POST',
        ca,
        headers: { authorization: `Bearer ${token.trim()}`, 'content-type': 'application/json' },
      },
      (res) => {
        let body = '';
        res.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
        res.on('end', () => {
          const status = res.statusCode ?? 0;
          const review = status === 201 ? (JSON.parse(body) as SelfSubjectReview) : undefined;
          resolve({ status, username: review?.status.userInfo.username ?? null });
        });
      },
    );
    req.on('error', reject);
    req.end(JSON.stringify({ apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' }));
  });
}

interface SelfSubjectReview {
  status: { userInfo: { username: string } };
}
