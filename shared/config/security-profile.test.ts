// security.profile: what each profile grants (docs/security.md, Security profiles). strict refuses
// every insecure gateway transport option, in the collector and in the executor alike, and turns
// Secret redaction on whatever redact_secrets says; default keeps the seed's behaviour.
import { describe, expect, it } from 'vitest';
import { load, problems } from './load-for-test.js';

const STRICT_REFUSAL = 'is refused by security.profile strict: connect over verified TLS';

const config = (gateway: string, profile: string, extra = '') =>
  `gateway: {${gateway}}\nsecurity: {profile: ${profile}}\n${extra}`;

describe('security.profile strict', () => {
  it.each([
    ['tls: false', 'gateway.tls'],
    ['insecure_skip_verify: true', 'gateway.insecure_skip_verify'],
    ['allow_insecure: true', 'gateway.allow_insecure'],
  ])('refuses %s, naming the key', (gateway, key) => {
    expect(problems(config(gateway, 'strict'))).toEqual([`${key}: ${STRICT_REFUSAL}`]);
  });

  it('refuses all three at once, each by its key, acknowledgement or not', () => {
    expect(
      problems(config('tls: false, insecure_skip_verify: true, allow_insecure: true', 'strict')),
    ).toEqual([
      `gateway.tls: ${STRICT_REFUSAL}`,
      `gateway.insecure_skip_verify: ${STRICT_REFUSAL}`,
      `gateway.allow_insecure: ${STRICT_REFUSAL}`,
    ]);
  });

  it('refuses them in the executor too, which reads the same file', () => {
    expect(problems(config('tls: false', 'strict'), { role: 'executor' })).toEqual([
      `gateway.tls: ${STRICT_REFUSAL}`,
    ]);
  });

  it('accepts verified TLS, with a private CA', () => {
    const { config: loaded } = load(config('tls: true, ca_cert_path: /etc/ca.pem', 'strict'));
    expect(loaded.security.profile).toBe('strict');
    expect(loaded.gateway.tls).toBe(true);
  });

  it('redacts Secret values in state and query, whatever redact_secrets says', () => {
    const { config: loaded } = load(
      config(
        '',
        'strict',
        'collect: {state: {redact_secrets: false}}\nquery: {redact_secrets: false}\n',
      ),
    );
    expect(loaded.collect.state.redact_secrets).toBe(true);
    expect(loaded.query.redact_secrets).toBe(true);
  });
});

describe('security.profile default (the seed)', () => {
  it('lets Secret values flow unless redact_secrets is set, and query inherits it', () => {
    expect(load('').config.collect.state.redact_secrets).toBe(false);
    expect(load('').config.query.redact_secrets).toBe(false);
    const redacted = load('collect: {state: {redact_secrets: true}}\n').config;
    expect(redacted.query.redact_secrets).toBe(true);
  });

  it('accepts plaintext or unverified TLS with the acknowledgement (the chart refuses it without)', () => {
    const { config: loaded } = load(config('tls: false, allow_insecure: true', 'default'));
    expect(loaded.gateway.tls).toBe(false);
  });

  it('refuses an unknown profile by name', () => {
    expect(problems('security: {profile: paranoid}\n')[0]).toMatch(/^security\.profile: /);
  });
});
