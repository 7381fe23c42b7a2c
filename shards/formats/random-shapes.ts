import { InvalidArgumentError } from '../errors.js'

// Shapes of the random-weight models (shards/formats/random-model.ts): the named ones and the
// `dim,layers,heads,kvHeads,ffn,vocab[,tied]` spelling of make-model --shape.

/** The hyper-parameters a random model is built from (see randomModelConfig). */
export interface ModelShape {
  readonly name: string
  readonly dim: number
  readonly nLayers: number
  readonly nHeads: number
  readonly nKvHeads: number
  readonly hiddenDim: number
  readonly vocabSize: number
  /** LM head shares token_embd (no output.weight). */
  readonly tied: boolean
  /** Default context length. */
  readonly seqLen: number
  /** RoPE base frequency (default 10000). */
  readonly ropeTheta?: number
  /**
   * Factor on the LM head's random weights (untied shapes only; default 1). Logits of a head
   * uniform in ±1/√dim have a standard deviation near 0.58 over the vocabulary, so with 128k
   * tokens the top two are typically a tenth of a logit apart; ×14 gives about 8, so greedy
   * decoding has clear margins and implementations that differ by rounding pick the same token.
   */
  readonly outputScale?: number
}

const shape = (
  name: string,
  dim: number,
  nLayers: number,
  nHeads: number,
  nKvHeads: number,
  hiddenDim: number,
  vocabSize: number,
  tied: boolean,
  seqLen: number,
  extra: { ropeTheta?: number; outputScale?: number } = {}
): ModelShape => ({ name, dim, nLayers, nHeads, nKvHeads, hiddenDim, vocabSize, tied, seqLen, ...extra })

/**
 * 15m/42m/110m are llama2.c's TinyStories configs, 1.1b is TinyLlama-1.1B, 8b is Llama-3-8B's
 * shape (GQA 32/8 heads, 128256-token vocabulary, RoPE θ 500000) with a peaked LM head.
 */
export const MODEL_SHAPES: Readonly<Record<string, ModelShape>> = {
  tiny: shape('tiny', 64, 3, 4, 2, 96, 300, false, 128),
  '15m': shape('15m', 288, 6, 6, 6, 768, 32000, true, 256),
  '42m': shape('42m', 512, 8, 8, 8, 1376, 32000, true, 1024),
  '110m': shape('110m', 768, 12, 12, 12, 2048, 32000, true, 1024),
  '1.1b': shape('1.1b', 2048, 22, 32, 4, 5632, 32000, false, 2048),
  '8b': shape('8b', 4096, 32, 32, 8, 14336, 128256, false, 2048, { ropeTheta: 500000, outputScale: 14 })
}

/** 3 specials and 256 byte tokens, plus at least one normal piece. */
export const MIN_VOCAB_SIZE = 260
const CUSTOM_SEQ_LEN = 512 // default context of a "dim,layers,..." shape

/** Throws InvalidArgumentError unless the shape is one a Llama forward pass can run. */
export function validateShape(s: ModelShape): void {
  for (const f of ['dim', 'nLayers', 'nHeads', 'nKvHeads', 'hiddenDim', 'vocabSize', 'seqLen'] as const) {
    if (!Number.isSafeInteger(s?.[f]) || s[f] < 1)
      throw new InvalidArgumentError(`shape ${f} must be a positive integer, got ${s?.[f]}`)
  }
  if (s.dim % s.nHeads !== 0) throw new InvalidArgumentError(`dim ${s.dim} is not a multiple of heads ${s.nHeads}`)
  if (s.nHeads % s.nKvHeads !== 0) throw new InvalidArgumentError(`heads ${s.nHeads} is not a multiple of kvHeads ${s.nKvHeads}`)
  // RoPE rotates pairs of dimensions within a head.
  if ((s.dim / s.nHeads) % 2 !== 0) throw new InvalidArgumentError(`head size ${s.dim / s.nHeads} must be even for RoPE`)
  if (s.vocabSize < MIN_VOCAB_SIZE)
    throw new InvalidArgumentError(`vocab ${s.vocabSize} is below ${MIN_VOCAB_SIZE} (specials + 256 byte tokens)`)
  if (typeof s.tied !== 'boolean') throw new InvalidArgumentError('shape tied must be a boolean')
}

/** A shape name (MODEL_SHAPES) or "dim,layers,heads,kvHeads,ffn,vocab[,tied|untied]" (untied by default). */
export function parseShape(spec: string): ModelShape {
  if (typeof spec !== 'string') throw new InvalidArgumentError('shape spec must be a string')
  const key = spec.trim().toLowerCase()
  if (Object.hasOwn(MODEL_SHAPES, key)) return MODEL_SHAPES[key]
  const parts = spec.split(',').map((p) => p.trim())
  if (parts.length !== 6 && parts.length !== 7) {
    throw new InvalidArgumentError(
      `unknown shape "${spec}": use one of ${Object.keys(MODEL_SHAPES).join(', ')} or dim,layers,heads,kvHeads,ffn,vocab[,tied]`
    )
  }
  const names = ['dim', 'layers', 'heads', 'kvHeads', 'ffn', 'vocab']
  const nums = parts.slice(0, 6).map((p, i) => {
    if (!/^0*[1-9]\d{0,8}$/.test(p))
      throw new InvalidArgumentError(`shape "${spec}": ${names[i]} "${p}" is not a positive integer`)
    return Number(p)
  })
  const tiedWord = parts[6] ?? 'untied'
  if (tiedWord !== 'tied' && tiedWord !== 'untied')
    throw new InvalidArgumentError(`shape "${spec}": 7th field must be tied or untied`)
  const [dim, nLayers, nHeads, nKvHeads, hiddenDim, vocabSize] = nums
  const s = shape(parts.join(','), dim, nLayers, nHeads, nKvHeads, hiddenDim, vocabSize, tiedWord === 'tied', CUSTOM_SEQ_LEN)
  validateShape(s)
  return s
}

// Fry's first 100 words and a few story words; with every prefix added, SentencePiece's
