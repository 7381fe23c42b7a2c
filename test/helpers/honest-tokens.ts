import {
  createEdge,
  createLocalPipeline,
  createShard,
  createTokenizer,
  generateTokens,
  openModelFile
} from '../../shards/index.js'
import { GGUF_PATH } from './reference.js'

/**
 * The greedy continuation of `prompt` on a model file (default stories260K), computed in this
 * process (whole model, one shard): what an honest swarm must produce.
 */
export async function honestTokens(prompt: string, maxTokens: number, path: string = GGUF_PATH): Promise<number[]> {
  const model = openModelFile(path)
  try {
    const tokenizer = createTokenizer(model.vocabulary!)
    const tokens: number[] = []
    for await (const t of generateTokens({
      temperature: 0,
      edge: createEdge({ model }),
      pipeline: createLocalPipeline(
        [createShard({ model, start: 0, end: model.config.nLayers })],
        'local',
        Math.min(512, model.config.seqLen)
      ),
      promptTokens: tokenizer.encode(prompt),
      maxTokens,
      stopIds: tokenizer.stopIds
    }))
      tokens.push(t)
    return tokens
  } finally {
    model.close()
  }
}
