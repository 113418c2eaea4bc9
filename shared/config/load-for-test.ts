// Test support for the config tests (not used by the agent): load YAML with the minimum a collector needs.
import { ConfigError } from '../errors.js';
import { loadConfig, type LoadConfigOptions, type LoadedConfig } from './load-config.js';

export const TOKEN = 'tok-3f9a-very-secret-value';
export const BASE_ENV = { KUBEXA_TENANT_TOKEN: TOKEN, KUBEXA_GATEWAY_ADDRESS: 'gw.example:443' };

/** Loads `yaml` with a token and gateway address from env, unless `env` replaces them. */
export function load(yaml: string, options: Partial<LoadConfigOptions> = {}): LoadedConfig {
  return loadConfig({ fileText: yaml, env: BASE_ENV, ...options });
}

/** The ConfigError that loading `yaml` throws; fails the test when loading succeeds. */
export function loadError(yaml: string, options: Partial<LoadConfigOptions> = {}): ConfigError {
  try {
    load(yaml, options);
  } catch (err: unknown) {
    if (err instanceof ConfigError) return err;
    throw err;
  }
  throw new Error('expected the config to be refused');
}

/** `path: message` lines of a refusal. */
export function problems(yaml: string, options: Partial<LoadConfigOptions> = {}): string[] {
  return loadError(yaml, options).issues.map((issue) => `${issue.path}: ${issue.message}`);
}

/** The issue paths of a refusal. */
export function problemPaths(yaml: string, options: Partial<LoadConfigOptions> = {}): string[] {
  return loadError(yaml, options).issues.map((issue) => issue.path);
}
