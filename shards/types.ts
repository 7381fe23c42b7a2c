import type { QuantDType } from './quant-blocks.js'

/** Hyper-parameters of a Llama-family model (llama2.c Config, GGUF `llama.*`). */
export interface ModelConfig {
  readonly architecture: 'llama'
  /** Hidden size (GGUF llama.embedding_length). */
  readonly dim: number
  /** SwiGLU inner size (llama.feed_forward_length). */
  readonly hiddenDim: number
  readonly nLayers: number
  readonly nHeads: number
  readonly nKvHeads: number
  /** dim / nHeads. */
  readonly headDim: number
  /** nKvHeads * headDim. */
  readonly kvDim: number
  readonly vocabSize: number
  /** Maximum context length in tokens. */
  readonly seqLen: number
  readonly ropeTheta: number
  readonly rmsEps: number
  /** True when the LM head reuses the token embedding matrix. */
  readonly tiedEmbeddings: boolean
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
export type TensorName = 'token_embd' | 'output_norm' | 'output' | `blk.${number}.${BlockTensor}`

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
}
