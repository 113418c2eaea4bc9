// Regenerates helm/kubexa-agent/values.schema.json from the agent's config schema plus the
// chart-only properties in helm/kubexa-agent/values.schema.chart-only.json.
//   npx tsx scripts/gen-values-schema.ts
// The output is formatted with the repository's Prettier config, so `prettier --check` and a
// regenerate-and-diff check agree.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { format, resolveConfig } from 'prettier';
import { valuesSchemaForConfig, type JsonSchema } from '../shared/config/to-values-schema.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const chartDir = join(root, 'helm', 'kubexa-agent');
const chartOnlyFile = join(chartDir, 'values.schema.chart-only.json');
const outputFile = join(chartDir, 'values.schema.json');

function readChartOnly(): Record<string, JsonSchema> {
  if (!existsSync(chartOnlyFile)) {
    throw new Error(
      `${relative(root, chartOnlyFile)} does not exist: the chart must supply its chart-only values ` +
        '(image, rbac, secret, persistence, ...) there, as a JSON object of JSON Schema properties',
    );
  }
  const parsed: unknown = JSON.parse(readFileSync(chartOnlyFile, 'utf8'));
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new Error(`${relative(root, chartOnlyFile)} must hold a JSON object of properties`);
  }
  return parsed as Record<string, JsonSchema>;
}

async function main(): Promise<void> {
  const schema = valuesSchemaForConfig(readChartOnly());
  const options = (await resolveConfig(outputFile)) ?? {};
  const text = await format(JSON.stringify(schema, null, 2), { ...options, parser: 'json' });
  writeFileSync(outputFile, text);
  process.stdout.write(`wrote ${relative(root, outputFile)}\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`gen-values-schema: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exitCode = 1;
});
