// Secrets never reach logs: every redacted path, logged the way components log, is censored.
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger } from './create-logger.js';

function capture(): { logger: ReturnType<typeof createLogger>; lines: () => string[] } {
  const chunks: string[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _encoding, done) {
      chunks.push(chunk.toString());
      done();
    },
  });
  const logger = createLogger({ level: 'info', base: { process: 'test' } }, destination);
  return { logger, lines: () => chunks.join('').split('\n').filter(Boolean) };
}

const SECRET = 'sk-secret-0123456789';

describe('createLogger', () => {
  it.each([
    ['token', { token: SECRET }],
    ['*.token', { gateway: { token: SECRET } }],
    ['*.tenant_token', { config: { tenant_token: SECRET } }],
    ['*.tenantToken', { handshake: { tenantToken: SECRET } }],
    ['authorization', { authorization: `Bearer ${SECRET}` }],
    ['*.authorization', { metadata: { authorization: `Bearer ${SECRET}` } }],
    ['headers.authorization', { headers: { authorization: `Bearer ${SECRET}` } }],
    ['*.bearerToken', { user: { bearerToken: SECRET } }],
    ['*.kubeconfig', { source: { kubeconfig: `token: ${SECRET}` } }],
  ])('censors %s', (_path, fields) => {
    const { logger, lines } = capture();
    logger.info(fields, 'connecting');
    const [line] = lines();
    expect(line).toBeDefined();
    expect(line).not.toContain(SECRET);
    expect(line).toContain('[redacted]');
    expect(JSON.parse(line ?? '{}')).toMatchObject({ msg: 'connecting', process: 'test' });
  });

  it('keeps fields that are not secrets', () => {
    const { logger, lines } = capture();
    logger.info({ gateway: { address: 'gw:443' }, tokenCount: 3 }, 'ok');
    expect(JSON.parse(lines()[0] ?? '{}')).toMatchObject({
      gateway: { address: 'gw:443' },
      tokenCount: 3,
    });
  });
});
