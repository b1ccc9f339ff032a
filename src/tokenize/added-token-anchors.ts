/**
 * Anchors: the places in a text where the tokenizer's output cannot change whatever follows.
 *
 * A Hugging Face tokenizer first splits the text at occurrences of its added tokens
 * (`<|im_start|>`, `<|im_end|>`, `<think>`…), scanning left to right and taking the longest
 * added token that starts at each position; each added token becomes its own id, and each piece
 * between them is normalized, pre-tokenized and BPE-encoded on its own. So when
 * - no added token contains another (substring-free), and none has `lstrip`, `rstrip`,
 *   `single_word` or `normalized` set (those make a match depend on its neighbours or on the
 *   normalizer), and
 * - nothing in a piece's encoding depends on where the piece sits (no Metaspace pre-tokenizer,
 *   whose `prepend_scheme: "first"` treats the first piece apart; no ByteLevel
 *   `add_prefix_space`; no Prepend normalizer),
 * the end of an added-token occurrence is an anchor: encode(T) = encode(T[0..c)) ++
 * encode(T[c..)) for the anchor's character offset c. (The occurrence itself is found the same
 * way in any text sharing T[0..c): a match crossing c would have to contain it, which
 * substring-freedom excludes; see docs/tokenize.md for the whole argument.)
 *
 * `anchorsOf` finds the occurrences by the tokenizer's own rule and checks them against the ids
 * the tokenizer produced (each occurrence's id, in order, and no added-token id elsewhere);
 * when they disagree it returns undefined, and that text is never reused.
 */

export interface AddedToken {
  content: string;
  id: number;
}

interface TrieNode {
  next: Map<number, TrieNode>;
  id: number; // -1: no token ends here
  length: number;
}

/** Why a tokenizer.json's anchors are not safe, or undefined when they are. */
export function anchorUnsafeReason(tokenizerJson: Record<string, unknown>): string | undefined {
  const added = (tokenizerJson.added_tokens ?? []) as Record<string, unknown>[];
  for (const token of added) {
    for (const flag of ['lstrip', 'rstrip', 'single_word', 'normalized'])
      if (token[flag] === true) return `added token ${JSON.stringify(token.content)} has ${flag}`;
  }
  const contents = added.map((t) => String(t.content));
  for (const a of contents)
    for (const b of contents)
      if (a !== b && b.includes(a)) return `added token ${JSON.stringify(b)} contains ${JSON.stringify(a)}`;
  const unsafe = findNode(
    tokenizerJson.pre_tokenizer,
    (n) => n.type === 'Metaspace' || (n.type === 'ByteLevel' && n.add_prefix_space === true),
  );
  if (unsafe) return `pre-tokenizer ${String(unsafe.type)} depends on a piece's position`;
  const prepend = findNode(tokenizerJson.normalizer, (n) => n.type === 'Prepend');
  if (prepend) return "normalizer Prepend depends on a piece's position";
  return undefined;
}

function findNode(node: unknown, test: (n: Record<string, unknown>) => boolean): Record<string, unknown> | undefined {
  if (node === null || typeof node !== 'object') return undefined;
  if (Array.isArray(node)) {
    for (const child of node) {
      const hit = findNode(child, test);
      if (hit) return hit;
    }
    return undefined;
  }
  const obj = node as Record<string, unknown>;
  if (test(obj)) return obj;
  for (const value of Object.values(obj)) {
    const hit = findNode(value, test);
    if (hit) return hit;
  }
  return undefined;
}

export class AddedTokenScanner {
  private readonly root: TrieNode = { next: new Map(), id: -1, length: 0 };
  private readonly ids = new Set<number>();

  constructor(tokens: readonly AddedToken[]) {
    for (const { content, id } of tokens) {
      let node = this.root;
      for (let i = 0; i < content.length; i += 1) {
        const unit = content.charCodeAt(i);
        let child = node.next.get(unit);
        if (!child) {
          child = { next: new Map(), id: -1, length: i + 1 };
          node.next.set(unit, child);
        }
        node = child;
      }
      node.id = id;
      this.ids.add(id);
    }
  }

  /**
   * The anchors of `text` (encoded as `tokens`), as pairs [charEnd, tokenEnd] flattened, each
   * offset by `charBase`/`tokenBase`; undefined when the ids disagree with the scan.
   * O(text + tokens).
   */
  anchorsOf(text: string, tokens: Uint32Array, charBase = 0, tokenBase = 0): number[] | undefined {
    const out: number[] = [];
    let cursor = 0; // next token to look at
    let i = 0;
    while (i < text.length) {
      let node: TrieNode | undefined = this.root;
      let matchId = -1;
      let matchLength = 0;
      for (let j = i; j < text.length; j += 1) {
        node = node.next.get(text.charCodeAt(j));
        if (!node) break;
        if (node.id >= 0) {
          matchId = node.id;
          matchLength = node.length;
        }
      }
      if (matchId < 0) {
        i += 1;
        continue;
      }
      while (cursor < tokens.length && !this.ids.has(tokens[cursor] as number)) cursor += 1;
      if (cursor >= tokens.length || tokens[cursor] !== matchId) return undefined;
      cursor += 1;
      i += matchLength;
      out.push(charBase + i, tokenBase + cursor);
    }
    while (cursor < tokens.length) if (this.ids.has(tokens[cursor++] as number)) return undefined;
    return out;
  }
}
