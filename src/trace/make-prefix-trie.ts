/**
 * Which prefix trie trace analysis walks: the addon's (native/trie/prefix-trie.h) when it loads and
 * KVROUTE_NATIVE is not 0, else the TypeScript reference (prefix-trie.ts). Both give exactly the
 * same walks and node numbers (test/prefix-trie.test.ts); the addon's is several times faster
 * and holds about a third of the memory.
 */
import { loadNative, nativeDisabledByEnv, nativePath } from '../core/native.js';
import { PrefixTrie, type BlockTrie } from './prefix-trie.js';

/** Whether trace analysis uses the addon's trie when not told: it loads, and KVROUTE_NATIVE is not 0. */
export function nativeTrieByDefault(): boolean {
  return !nativeDisabledByEnv() && nativePath() !== null;
}

/** A fresh trie: the addon's when `native` (it must then load), else the reference. */
export function makePrefixTrie(native: boolean): BlockTrie {
  return native ? new (loadNative().PrefixTrie)() : new PrefixTrie();
}
