import type { QuantDType } from './quant/quant-blocks.js'

/** GGUF `general.architecture` values the engine runs (shards/architectures.ts). */
export type Architecture = 'llama' | 'qwen2' | 'qwen3'

/** Hyper-parameters of a model (llama2.c Config, GGUF `<arch>.*` keys). */
export interface ModelConfig {
  readonly architecture: Architecture
  /** Hidden size (GGUF llama.embedding_length). */
  readonly dim: number
  /** SwiGLU inner size (llama.feed_forward_length). */
  readonly hiddenDim: number
  readonly nLayers: number
  readonly nHeads: number
  readonly nKvHeads: number
  /** Size of one attention head (dim / nHeads, or GGUF attention.key_length when given). */
  readonly headDim: number
  /** nHeads * headDim: width of the queries and of attn_output's input (dim unless qwen3 says otherwise). */
  readonly qDim: number
  /** nKvHeads * headDim. */
  readonly kvDim: number
  readonly vocabSize: number
  /** Maximum context length in tokens. */
  readonly seqLen: number
  readonly ropeTheta: number
  readonly rmsEps: number
  /** True when the LM head reuses the token embedding matrix. */
  readonly tiedEmbeddings: boolean
  /**
   * How RoPE pairs a head's dimensions in the file's Q/K rows: 'norm' (2i, 2i+1) as llama.cpp's
   * LLAMA_ROPE_TYPE_NORM, 'neox' (i, i + headDim/2) as LLAMA_ROPE_TYPE_NEOX (qwen2, qwen3).
   */
  readonly ropeType: 'norm' | 'neox'
  /** Linear RoPE scaling: positions are multiplied by this (1 / rope.scaling.factor; 1 = none). */
  readonly ropeFreqScale: number
  /**
   * Per-pair RoPE frequency divisors (the `rope_freqs` tensor, headDim/2 values; llama3 scaling),
   * or null. The angle of pair j at position p is p * ropeFreqScale * θ^(-2j/headDim) / factor[j].
   */
  readonly ropeFreqFactors: readonly number[] | null
  /** attn_q/attn_k/attn_v carry bias vectors (qwen2). */
  readonly qkvBias: boolean
  /** Per-head RMSNorm on queries and keys before RoPE (qwen3 attn_q_norm / attn_k_norm). */
  readonly qkNorm: boolean
}

/**
 * Storage types of weight matrices. Q8_0: blocks of 32 int8 with one f16 scale (GGUF); the
 * other block types are listed in quant-blocks.ts.
 */
export type WeightDType = 'f32' | 'f16' | 'q8_0' | QuantDType

/**
 * A row-major weight matrix exactly as stored in the file: `rows` rows of `cols` elements.
 * A linear layer y = W x has W of shape [out=rows, in=cols].
 * `data` holds the raw bytes; for f32 it is 4-byte aligned so a Float32Array view is free.
 */
export interface WeightMatrix {
  readonly dtype: WeightDType
  readonly rows: number
  readonly cols: number
  readonly data: Uint8Array
}

/** GGUF tensor names the engine uses; llama2.c files are mapped onto them. */
export type TensorName =
  | 'token_embd'
  | 'output_norm'
  | 'output'
  | 'rope_freqs'
  | `blk.${number}.${BlockTensor}`
  | `blk.${number}.${BlockExtraTensor}`

/** Tensors only some architectures have (qwen2 biases, qwen3 Q/K norms); all are vectors. */
export type BlockExtraTensor = 'attn_q.bias' | 'attn_k.bias' | 'attn_v.bias' | 'attn_q_norm' | 'attn_k_norm'

export type BlockTensor =
  | 'attn_norm'
  | 'attn_q'
  | 'attn_k'
  | 'attn_v'
  | 'attn_output'
  | 'ffn_norm'
  | 'ffn_gate'
  | 'ffn_up'
  | 'ffn_down'

export const BLOCK_TENSORS: readonly BlockTensor[] = [
  'attn_norm',
  'attn_q',
  'attn_k',
  'attn_v',
  'attn_output',
  'ffn_norm',
  'ffn_gate',
  'ffn_up',
  'ffn_down'
]

/** A SentencePiece vocabulary, whatever file it came from. Pieces use real spaces (not U+2581). */
export interface Vocabulary {
  readonly pieces: readonly string[]
  readonly scores: Float32Array
  /** SentencePiece token types (1 normal, 2 unknown, 3 control, 4 user, 6 byte) when known. */
  readonly types?: Int32Array
  readonly bosId: number
  readonly eosId: number
  readonly unkId: number
  /** Generation also stops on this id (llama2.c stops when it samples BOS). */
  readonly stopIds: readonly number[]
  /**
   * GGUF `tokenizer.ggml.model`: 'llama' (SentencePiece, the default) or 'gpt2' (byte-level BPE,
   * whose pieces are in GPT-2's byte-to-unicode form and which merges by `merges` rank).
   */
  readonly model?: 'llama' | 'gpt2'
  /** gpt2: `tokenizer.ggml.merges`, "left right" in rank order. */
  readonly merges?: readonly string[]
  /** gpt2: `tokenizer.ggml.pre`, the pre-tokenizer's name (llama.cpp's names). */
  readonly pre?: string
  /** `tokenizer.ggml.add_bos_token` / `add_eos_token` (encode's defaults). */
  readonly addBos?: boolean
  readonly addEos?: boolean
}

/** Cancellation of an async call, the last argument of every one (the shape of libp2p's AbortOptions). */
export interface AbortOptions {
  readonly signal?: AbortSignal
}
