/**
 * Model presets for KV sizing. Bytes of KV cache one token occupies in a full-attention
 * transformer: kv_bytes_per_token = 2 (K and V) × layers × kv_heads × head_dim × dtype_bytes.
 * Each preset cites the config.json its numbers come from.
 */
export interface ModelPreset {
  name: string;
  layers: number;
  kvHeads: number;
  headDim: number;
  dtypeBytes: number;
  /** Where the shape comes from. */
  source: string;
}

export const MODEL_PRESETS: Readonly<Record<string, ModelPreset>> = {
  // num_hidden_layers 48, num_key_value_heads 4, head_dim 128, torch_dtype bfloat16 → 98,304 B,
  // the figure the reference experiments use (B1′, docs/glossary.md).
  'qwen3-coder-30b-a3b': {
    name: 'Qwen/Qwen3-Coder-30B-A3B-Instruct',
    layers: 48,
    kvHeads: 4,
    headDim: 128,
    dtypeBytes: 2,
    source: 'https://huggingface.co/Qwen/Qwen3-Coder-30B-A3B-Instruct/blob/main/config.json',
  },
  // num_hidden_layers 32, num_key_value_heads 8, hidden_size 4096 / 32 heads = head_dim 128, bf16 → 131,072 B.
  'llama-3.1-8b': {
    name: 'meta-llama/Llama-3.1-8B-Instruct',
    layers: 32,
    kvHeads: 8,
    headDim: 128,
    dtypeBytes: 2,
    source: 'https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct/blob/main/config.json',
  },
  // num_hidden_layers 80, num_key_value_heads 8, hidden_size 8192 / 64 heads = head_dim 128, bf16 → 327,680 B.
  'llama-3.1-70b': {
    name: 'meta-llama/Llama-3.1-70B-Instruct',
    layers: 80,
    kvHeads: 8,
    headDim: 128,
    dtypeBytes: 2,
    source: 'https://huggingface.co/meta-llama/Llama-3.1-70B-Instruct/blob/main/config.json',
  },
  // num_hidden_layers 28, num_key_value_heads 4, hidden_size 3584 / 28 heads = head_dim 128, bf16 → 57,344 B.
  'qwen2.5-7b': {
    name: 'Qwen/Qwen2.5-7B-Instruct',
    layers: 28,
    kvHeads: 4,
    headDim: 128,
    dtypeBytes: 2,
    source: 'https://huggingface.co/Qwen/Qwen2.5-7B-Instruct/blob/main/config.json',
  },
};

export const DEFAULT_MODEL_PRESET = 'qwen3-coder-30b-a3b';

export function kvBytesPerToken(preset: ModelPreset): number {
  return 2 * preset.layers * preset.kvHeads * preset.headDim * preset.dtypeBytes;
}
