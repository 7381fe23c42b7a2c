import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import OpenAI from 'openai'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { RunningApi } from '../../node/cli/commands/api.js'
import { demoSpans } from '../../node/cli/commands/demo.js'
import { type LocalNode, startLocalNode } from '../../node/cli/local-swarm.js'
import { createTokenizer, openModelFile, parseShape, writeRandomModel } from '../../shards/index.js'
import { loadPackageVocabulary } from '../../shards/tokenizers/vocab-packages.js'
import { localChatGreedy, startGatewayApi } from '../helpers/gateway-api.js'

// Issue 15: the demo's swarm (three node processes splitting [1, n-1) as `npm run demo -- --model F`
// does, chain forwarding, the client keeping blocks 0 and n-1) on a Qwen 3 file with the real
// Qwen vocabulary and chat template; the gateway serves a chat completion rendered with the
// file's own template (<|im_start|>/<|im_end|> as control tokens) and answers as one process does.

const FAST = ['--kernels', 'reference', '--announce-interval', '300']
const dir = mkdtempSync(join(tmpdir(), 'layerswarm-gw-demo-'))
const model = join(dir, 'qwen3-vocab.gguf')

describe("gateway chat with a Qwen 3 file's template over the demo's 3-process swarm", () => {
  const nodes: LocalNode[] = []
  let api: RunningApi
  let client: OpenAI

  beforeAll(async () => {
    const v = loadPackageVocabulary('qwen')
    const shape = { ...parseShape('64,6,4,2,128,300,tied'), vocabSize: v.tokens.length }
    writeRandomModel(model, shape, {
      dtype: 'f16',
      seed: 23,
      seqLen: 128,
      tokenizerMetadata: v.metadata,
      arch: { architecture: 'qwen3', headDim: 32, ropeTheta: 1000000 }
    })
    const spans = demoSpans(6)
    expect(spans).toEqual(['1:2', '2:4', '4:5'])
    nodes.push(await startLocalNode({ model, layers: spans[0], args: FAST, startTimeoutMs: 90_000 }))
    const bootstrap = [nodes[0].addrs[0]]
    nodes.push(
      ...(await Promise.all(
        spans.slice(1).map((layers) => startLocalNode({ model, layers, bootstrap, args: FAST, startTimeoutMs: 90_000 }))
      ))
    )
    api = await startGatewayApi({ model, bootstrap: bootstrap[0], forwarding: 'chain', routeTimeout: 60_000 })
    client = new OpenAI({ baseURL: `${api.gateway.url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 120_000 })
  }, 300_000)

  afterAll(async () => {
    await api?.close()
    await Promise.all(nodes.map((n) => n.stop()))
    rmSync(dir, { recursive: true, force: true })
  })

  it("renders Qwen's template with its control tokens and answers as the local model does", async () => {
    const res = await client.chat.completions.create({
      model: 'qwen3-vocab',
      messages: [{ role: 'user', content: 'Why is the sky blue?' }],
      max_tokens: 6,
      temperature: 0
    })
    const m = openModelFile(model)
    const tok = createTokenizer(m.vocabulary!)
    m.close()
    // Qwen 3's template for one user turn with the generation prompt (thinking left on).
    const rendered = '<|im_start|>user\nWhy is the sky blue?<|im_end|>\n<|im_start|>assistant\n'
    const promptTokens = tok.encode(rendered, { special: true })
    expect(promptTokens.slice(0, 1)).toEqual([151644]) // <|im_start|> as one control token, no BOS (add_bos false)
    expect(res.usage?.prompt_tokens).toBe(promptTokens.length)
    expect(res.usage?.completion_tokens).toBeGreaterThan(0)
    const local = await localChatGreedy(model, 'Why is the sky blue?', res.usage?.completion_tokens ?? 0)
    expect(local.promptTokens).toEqual(promptTokens)
    expect(res.choices[0].message.content).toBe(local.completion)
  }, 300_000)
})
