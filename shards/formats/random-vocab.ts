import { InvalidArgumentError } from '../errors.js'
import type { Vocabulary } from '../types.js'
import { MIN_VOCAB_SIZE } from './random-shapes.js'

// greedy pair merging can actually reach each word from its letters.
const WORDS = (
  'the of and a to in is you that it he was for on are as with his they I at be this have from or one had by ' +
  'word but not what all were we when your can said there use an each which she do how their if will up other about out ' +
  'many then them these so some her would make like him into time has look two more write go see number no way could ' +
  'people my than first water been call who oil its now find long down day did get come made may part once upon little ' +
  'girl boy happy story hello world'
).split(' ')

/**
 * A SentencePiece (llama) vocabulary of exactly `vocabSize` pieces: <unk>, <s>, </s>, the 256
 * byte-fallback tokens <0x00>..<0xFF> at ids 3..258 (as Llama's tokenizer.model), then normal
 * pieces with strictly decreasing scores. Deterministic; all pieces are distinct.
 */
export function syntheticVocabulary(vocabSize: number): Vocabulary {
  if (!Number.isSafeInteger(vocabSize) || vocabSize < MIN_VOCAB_SIZE) {
    throw new InvalidArgumentError(`vocabulary size must be an integer >= ${MIN_VOCAB_SIZE}, got ${vocabSize}`)
  }
  const pieces = ['<unk>', '<s>', '</s>']
  for (let b = 0; b < 256; b++) pieces.push(`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`)
  const normal = new Set<string>()
  // Every special and byte token looks like <...>; no normal piece does, so only normal ones can repeat.
  const add = (p: string): void => {
    if (pieces.length + normal.size < vocabSize) normal.add(p)
  }
  // Most useful first, so even a tiny vocabulary has letters and word starts.
  const lower = 'abcdefghijklmnopqrstuvwxyz'
  for (const c of ` ${lower}`) add(c)
  for (const c of lower) add(` ${c}`)
  for (let c = 0x21; c < 0x7f; c++) add(String.fromCharCode(c))
  for (const c of lower.toUpperCase()) add(` ${c}`)
  for (const w of WORDS) {
    for (let k = 2; k <= w.length; k++) {
      add(w.slice(0, k))
      add(` ${w.slice(0, k)}`)
    }
  }
  for (let n = 0; pieces.length + normal.size < vocabSize; n++) add(` tok${n}`)
  const nSpecial = pieces.length
  for (const p of normal) pieces.push(p) // not push(...normal): 128K arguments overflow the stack (8b vocab)
  const scores = new Float32Array(vocabSize)
  const types = new Int32Array(vocabSize)
  types.set([2, 3, 3]) // <unk> unknown, <s> and </s> control
  types.fill(6, 3, nSpecial) // byte
  types.fill(1, nSpecial) // normal
  for (let i = nSpecial; i < vocabSize; i++) scores[i] = -(i - nSpecial)
  return { pieces, scores, types, bosId: 1, eosId: 2, unkId: 0, stopIds: [2] }
}
