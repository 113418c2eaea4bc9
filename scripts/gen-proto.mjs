// Regenerates proto/gen from proto/**/*.proto with buf and ts-proto (both from npm), so the
// generated folder is a pure function of the .proto files. `npm run verify` diffs the result.
import { execFileSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const protoDir = join(root, 'proto');
const buf = join(root, 'node_modules', '.bin', 'buf');

rmSync(join(protoDir, 'gen'), { recursive: true, force: true });
execFileSync(buf, ['lint'], { cwd: protoDir, stdio: 'inherit' });
execFileSync(buf, ['generate'], { cwd: protoDir, stdio: 'inherit' });
