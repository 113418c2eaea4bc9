// The design card's runtime libraries install on `npm ci` and work on this Node version: each one
// is exercised for real once, so a native module that failed to build or an ESM/CJS mismatch
// fails here rather than in production.
import { KubeConfig } from '@kubernetes/client-node';
import { Server, ServerCredentials } from '@grpc/grpc-js';
import Database from 'better-sqlite3';
import fastify from 'fastify';
import { minimatch } from 'minimatch';
import { spawn } from 'node-pty';
import { pino } from 'pino';
import { Counter, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';

describe('runtime libraries', () => {
  it('better-sqlite3 opens a database and runs a query in WAL mode', () => {
    const db = new Database(':memory:');
    db.exec('create table t (v integer)');
    db.prepare('insert into t (v) values (?)').run(41);
    expect(db.prepare('select v + 1 as v from t').get()).toEqual({ v: 42 });
    db.close();
  });

  it('node-pty runs a command in a real pseudo-terminal', async () => {
    const term = spawn('sh', ['-c', 'test -t 1 && echo tty-yes'], { cols: 80, rows: 24 });
    let output = '';
    term.onData((data) => (output += data));
    const exitCode = await new Promise<number>((resolve) => {
      term.onExit(({ exitCode: code }) => {
        resolve(code);
      });
    });
    expect(exitCode).toBe(0);
    expect(output).toContain('tty-yes');
  });

  it('fastify serves a route on loopback', async () => {
    const app = fastify();
    app.get('/ping', () => ({ pong: true }));
    await app.listen({ host: '127.0.0.1', port: 0 });
    try {
      const address = app.server.address();
      if (address === null || typeof address === 'string') throw new Error('not a TCP address');
      const response = await fetch(`http://127.0.0.1:${String(address.port)}/ping`);
      expect(await response.json()).toEqual({ pong: true });
    } finally {
      await app.close();
    }
  });

  it('grpc-js binds a server on loopback', async () => {
    const server = new Server();
    const port = await new Promise<number>((resolve, reject) => {
      server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (err, bound) => {
        if (err) reject(err);
        else resolve(bound);
      });
    });
    expect(port).toBeGreaterThan(0);
    server.forceShutdown();
  });

  it('prom-client exposes a counter from a private registry', async () => {
    const registry = new Registry();
    const counter = new Counter({ name: 'agent_test_total', help: 'test', registers: [registry] });
    counter.inc(3);
    expect(await registry.metrics()).toContain('agent_test_total 3');
  });

  it('pino, zod, minimatch and client-node load and work', () => {
    const lines: string[] = [];
    pino({ base: null }, { write: (line: string) => lines.push(line) }).info('hello');
    expect(JSON.parse(lines[0]!)).toMatchObject({ msg: 'hello' });
    expect(z.object({ a: z.number() }).safeParse({ a: 'x' }).success).toBe(false);
    expect(minimatch('kube-system', 'kube-*')).toBe(true);
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: 'c', server: 'https://127.0.0.1:6443' }],
      users: [{ name: 'u', token: 't' }],
      contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
      currentContext: 'x',
    });
    expect(kc.getCurrentCluster()?.server).toBe('https://127.0.0.1:6443');
  });
});
