import type { QuantDType } from './quant/quant-dtypes.js'

/** GGUF `general.architecture` values the engine runs (shards/model/architectures.ts). */
export type Architecture = 'llama' | 'qwen2' | 'qwen3' | 'gemma2' | 'gemma3' | 'phi3' | 'qwen3moe' | 'qwen2moe'

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
  /** Dims of each head that RoPE rotates (rope.dimension_count, partial rotary); headDim when absent. */
  readonly ropeDims?: number
  /** cos/sin scale of the rotated dims (YaRN mscale, longrope attn_factor; shards/model/rope-config.ts); 1 when absent. */
  readonly ropeMagnitude?: number
  /** YaRN's ramp between interpolated and extrapolated angles (shards/model/rope-config.ts). */
  readonly ropeYarn?: RopeYarn
  /** The mixture-of-experts FFN (shards/moe-block.ts); absent for dense models. */
  readonly moe?: MoeParams
  /** attn_q/attn_k/attn_v carry bias vectors (qwen2). */
  readonly qkvBias: boolean
  /** Per-head RMSNorm on queries and keys before RoPE (qwen3 attn_q_norm / attn_k_norm). */
  readonly qkNorm: boolean
  /** The steps Gemma 2/3 add to the Llama block (shards/family-block.ts); absent for the others. */
  readonly family?: FamilyParams
}

/** YaRN (ggml rope_yarn): pair j mixes its angles by ramp(j) · extFactor, 1 below corrLow, 0 above corrHigh. */
export interface RopeYarn {
  readonly extFactor: number
  readonly corrLow: number
  readonly corrHigh: number
}

/**
 * A mixture-of-experts FFN as llama.cpp's build_moe_ffn runs it (qwen3moe, qwen2moe, Mixtral):
 * router logits = ffn_gate_inp · x, softmax, the top `nUsed` of `nExperts`, weights
 * renormalised to sum 1 when `normTopK`, each chosen expert a SwiGLU FFN of `expertHidden`.
 * qwen2moe adds a shared expert of `sharedHidden`, gated by sigmoid(ffn_gate_inp_shexp · x).
 */
export interface MoeParams {
  readonly nExperts: number
  readonly nUsed: number
  readonly expertHidden: number
  readonly normTopK: boolean
  /** Shared expert FFN size (qwen2moe); 0 for none. */
  readonly sharedHidden: number
}

/**
 * Gemma 2 / Gemma 3 steps, as llama.cpp's graphs run them (src/models/gemma2.cpp, gemma3.cpp).
 * Gemma's RMSNorm multiplies by (1 + w); llama.cpp's converter stores 1 + w in the GGUF
 * (conversion/gemma.py modify_tensors / norm_shift), so the engine's plain RMSNorm applies.
 */
export interface FamilyParams {
  /** FFN activation: 'gelu' is GeGLU (tanh-GELU of the gate times up, ggml's f16 table). */
  readonly ffnAct: 'silu' | 'gelu'
  /** post_attention_norm / post_ffw_norm: RMSNorm of the attention and FFN outputs before each residual add. */
  readonly postNorms: boolean
  /** Token embeddings are multiplied by this (Gemma: sqrtf(dim)); 1 for none. */
  readonly embedScale: number
  /** Queries are multiplied by this after RoPE, and attention's own scale is then 1 (f_attention_scale). */
  readonly attnScale: number
  /** Attention scores become cap·tanh(s / cap) before the softmax (Gemma 2: 50); 0 for none. */
  readonly attnSoftcap: number
  /** Logits become cap·tanh(z / cap) (Gemma 2: 30); 0 for none. */
  readonly finalSoftcap: number
  /** Sliding-window layers see keys at p0 with p − p0 < window (LLAMA_SWA_TYPE_STANDARD); 0 for none. */
  readonly slidingWindow: number
  /** Layer l slides when l % swaPeriod < swaPeriod − 1 (llama_hparams::set_swa_pattern). */
  readonly swaPeriod: number
  /** RoPE base and linear scale of the sliding layers (rope.freq_base_swa; Gemma 3 default 10000, 1). */
  readonly ropeThetaSwa: number
  readonly ropeFreqScaleSwa: number
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
  | 'rope_factors_short'
  | 'rope_factors_long'
  | `blk.${number}.${BlockTensor}`
  | `blk.${number}.${BlockExtraTensor}`
  | `blk.${number}.ffn_gate_inp`
  | `blk.${number}.${'ffn_gate_exps' | 'ffn_up_exps' | 'ffn_down_exps'}.${number}`
  | `blk.${number}.${SharedExpertTensor}`

/** qwen2moe's shared expert: its sigmoid gate vector [dim] and its SwiGLU FFN (shards/moe-block.ts). */
export type SharedExpertTensor = 'ffn_gate_inp_shexp' | 'ffn_gate_shexp' | 'ffn_up_shexp' | 'ffn_down_shexp'

/** Tensors only some architectures have (qwen2 biases, qwen3 Q/K norms); all are vectors. */
export type BlockExtraTensor =
  | 'attn_q.bias'
  | 'attn_k.bias'
  | 'attn_v.bias'
  | 'attn_q_norm'
  | 'attn_k_norm'
  | 'post_attention_norm'
  | 'post_ffw_norm'

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
