// A throwaway CA and a server certificate it signed, generated with openssl as the fixtures in
// test/fixtures/tls were (an EC P-256 CA; a server certificate for 127.0.0.1 and localhost with
// extendedKeyUsage=serverAuth), for tests that need more than the one fixture CA: a CA rotation.
// Valid for two days; the CA's key stays in `dir`, which the test removes.
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface TestCa {
  /** The CA certificate (PEM): what a client trusts. */
  readonly caPem: string;
  /** The server certificate (PEM) signed by the CA, for 127.0.0.1 and localhost. */
  readonly serverCertPem: string;
  readonly serverKeyPem: string;
}

const openssl = (args: string[]) => {
  execFileSync('openssl', args, { stdio: ['ignore', 'ignore', 'pipe'] });
};

/** Generates the CA `name` and its server certificate in `dir` (files prefixed with `name`). */
export function createTestCa(dir: string, name: string): TestCa {
  const file = (suffix: string) => join(dir, `${name}-${suffix}`);
  const ec = ['-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256'];
  openssl(['genpkey', ...ec, '-out', file('ca-key.pem')]);
  openssl([
    'req',
    '-x509',
    '-new',
    '-key',
    file('ca-key.pem'),
    '-subj',
    `/CN=${name}`,
    '-days',
    '2',
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign',
    '-out',
    file('ca.pem'),
  ]);
  openssl(['genpkey', ...ec, '-out', file('server-key.pem')]);
  openssl([
    'req',
    '-new',
    '-key',
    file('server-key.pem'),
    '-subj',
    `/CN=${name} server`,
    '-out',
    file('server.csr'),
  ]);
  writeFileSync(
    file('server.ext'),
    [
      'basicConstraints=critical,CA:FALSE',
      'keyUsage=critical,digitalSignature',
      'extendedKeyUsage=serverAuth',
      'subjectAltName=IP:127.0.0.1,DNS:localhost',
      '',
    ].join('\n'),
  );
  openssl([
    'x509',
    '-req',
    '-in',
    file('server.csr'),
    '-CA',
    file('ca.pem'),
    '-CAkey',
    file('ca-key.pem'),
    '-CAcreateserial',
    '-days',
    '2',
    '-extfile',
    file('server.ext'),
    '-out',
    file('server.pem'),
  ]);
  return {
    caPem: readFileSync(file('ca.pem'), 'utf8'),
    serverCertPem: readFileSync(file('server.pem'), 'utf8'),
    serverKeyPem: readFileSync(file('server-key.pem'), 'utf8'),
  };
}
