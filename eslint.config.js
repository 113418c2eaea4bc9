// @ts-check
import js from '@eslint/js';
import nodePlugin from 'eslint-plugin-n';
import tseslint from 'typescript-eslint';

const appDirs = ['collector', 'executor', 'shared', 'demo-gateway', 'proto', 'cli'];
const appFiles = appDirs.map((dir) => `${dir}/**/*.ts`);
const mainFiles = appDirs.map((dir) => `${dir}/**/main.ts`);

/** Boundary: generated protobuf code is reached only through proto/index.ts. */
const generatedCode = {
  group: ['**/gen/*', '**/gen/**'],
  message: 'Import generated protobuf code from proto/index.ts, never from proto/gen directly.',
};

export default tseslint.config(
  { ignores: ['node_modules/**', 'dist/**', 'proto/gen/**', 'coverage/**', 'test-results/**'] },
  js.configs.recommended,
  ...tseslint.configs.strictTypeChecked,
  ...tseslint.configs.stylisticTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    plugins: { n: nodePlugin },
    rules: {
      '@typescript-eslint/switch-exhaustiveness-check': 'error',
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/restrict-template-expressions': ['error', { allowNumber: true }],
      'no-console': 'error',
      'max-params': ['error', 4],
      complexity: ['error', 12],
      'max-depth': ['error', 3],
      'no-restricted-imports': ['error', { patterns: [generatedCode] }],
      // @kubernetes/client-node models are data-only classes that the library itself builds from
      // object literals (its serializer reads plain objects); requiring `new V1Pod()` adds nothing.
      '@typescript-eslint/no-unsafe-class-instance-assignment': 'off',
    },
  },
  {
    files: ['**/*.js', '**/*.mjs'],
    ...tseslint.configs.disableTypeChecked,
  },
  {
    // Only main.ts touches process (env, argv, signals, exit): everything else receives values.
    files: appFiles,
    ignores: mainFiles,
    rules: {
      'n/no-process-env': 'error',
      'n/no-process-exit': 'error',
      'no-restricted-globals': [
        'error',
        { name: 'process', message: 'Only main.ts touches process; pass the value in.' },
      ],
    },
  },
  {
    files: ['collector/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            generatedCode,
            {
              group: ['**/executor/**', '**/executor'],
              message: 'The collector never imports the executor: they talk over executor.v1 gRPC.',
            },
            {
              group: ['**/demo-gateway/**'],
              message: 'The demo gateway is not part of the agent.',
            },
          ],
        },
      ],
    },
  },
  {
    files: ['executor/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            generatedCode,
            {
              group: ['**/collector/**', '**/collector'],
              message:
                'The executor never imports the collector: it trusts nothing the collector says.',
            },
            {
              group: ['**/demo-gateway/**'],
              message: 'The demo gateway is not part of the agent.',
            },
          ],
        },
      ],
    },
  },
  {
    files: ['shared/**/*.ts', 'proto/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            generatedCode,
            {
              group: ['**/collector/**', '**/executor/**', '**/demo-gateway/**', '**/test/**'],
              message: 'shared/ and proto/ depend on no application folder.',
            },
          ],
        },
      ],
    },
  },
  {
    files: ['proto/index.ts'],
    rules: { 'no-restricted-imports': 'off' },
  },
  {
    // Tests may assert with non-null values they just checked and use the test harness freely.
    files: ['**/*.test.ts', 'test/**/*.ts', 'bench/**/*.ts'],
    rules: {
      '@typescript-eslint/no-non-null-assertion': 'off',
      'max-depth': 'off',
      complexity: 'off',
    },
  },
);
