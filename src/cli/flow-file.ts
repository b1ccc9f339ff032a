/**
 * Flow control's configuration from a file (`serve --flow FILE`, `sim run --flow FILE`): YAML or
 * JSON, validated by resolveFlowConfig, every error naming the flag, the file and the key.
 */
import { readFileSync } from 'node:fs';

import { parse as parseYaml } from 'yaml';

import { FlowConfigError, resolveFlowConfig, type FlowConfig } from '../flow/flow-config.js';

/** A flow config from `raw`: an object as given (a YAML `flow:` section) or a file path; `source` names where it came from. */
export function flowConfigFrom(raw: unknown, source: string, fail: (message: string) => Error): FlowConfig {
  let spec = raw;
  let where = source;
  if (typeof raw === 'string') {
    if (raw.trim() === '') throw fail(`${source} must be the path of a YAML or JSON file`);
    let text: string;
    try {
      text = readFileSync(raw, 'utf8');
    } catch (error) {
      throw fail(`${source}: cannot read ${raw} (${(error as NodeJS.ErrnoException).code ?? String(error)})`);
    }
    try {
      spec = parseYaml(text);
    } catch (error) {
      throw fail(`${source}: ${raw} is not YAML or JSON (${(error as Error).message.split('\n')[0]})`);
    }
    where = `${source} ${raw}: flow`;
  }
  try {
    return resolveFlowConfig(spec, where);
  } catch (error) {
    if (error instanceof FlowConfigError) throw fail(error.message);
    throw error;
  }
}
