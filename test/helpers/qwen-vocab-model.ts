import { parseShape, writeRandomModel } from '../../shards/index.js'
import { loadPackageVocabulary } from '../../shards/tokenizers/vocab-packages.js'

/**
 * A small random-weight f16 file with Qwen 3's real vocabulary and chat template (no BOS, control
 * tokens in every chat prompt): dim 64, `layers` blocks, qwen3 architecture.
 */
export function writeQwenVocabModel(path: string, o: { layers: number; seed: number; seqLen: number }): void {
  const v = loadPackageVocabulary('qwen')
  writeRandomModel(
    path,
    { ...parseShape(`64,${o.layers},4,2,128,300,tied`), vocabSize: v.tokens.length },
    {
      dtype: 'f16',
      seed: o.seed,
      seqLen: o.seqLen,
      tokenizerMetadata: v.metadata,
      arch: { architecture: 'qwen3', headDim: 32, ropeTheta: 1000000 }
    }
  )
}
