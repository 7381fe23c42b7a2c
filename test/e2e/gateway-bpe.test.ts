import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import OpenAI from 'openai'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { RunningApi } from '../../node/cli/commands/api.js'
import { runRemoteGenerate } from '../../node/cli/commands/generate/generate-remote.js'
import { type LocalNode, startLocalNode } from '../../node/cli/local-swarm.js'
import { createTokenizer, openModelFile, parseShape, writeRandomModel } from '../../shards/index.js'
import { loadPackageVocabulary } from '../../shards/tokenizers/vocab-packages.js'
import { localChatGreedy, startGatewayApi } from '../helpers/gateway-api.js'

// Issue 15: a Llama-architecture model with the real Llama 3 vocabulary (byte-level BPE, as
// make-model --vocab llama3 writes it) served by a 2-process swarm; the gateway applies the
// model's own chat template, and its control tokens reach the model as tokens.

const FAST = ['--kernels', 'reference', '--announce-interval', '300']
const dir = mkdtempSync(join(tmpdir(), 'layerswarm-gw-bpe-'))
const model = join(dir, 'llama3-vocab.gguf')

describe('gateway chat on a Llama 3 vocabulary model over a 2-process swarm', () => {
  const nodes: LocalNode[] = []
  let api: RunningApi
  let client: OpenAI

  beforeAll(async () => {
    const v = loadPackageVocabulary('llama3')
    const shape = { ...parseShape('64,4,4,2,128,300,tied'), vocabSize: v.tokens.length }
    writeRandomModel(model, shape, { dtype: 'f16', seed: 11, seqLen: 128, tokenizerMetadata: v.metadata })
    nodes.push(await startLocalNode({ model, layers: '0:3', args: FAST, startTimeoutMs: 90_000 }))
    nodes.push(await startLocalNode({ model, layers: '2:4', bootstrap: [nodes[0].addrs[0]], args: FAST, startTimeoutMs: 90_000 }))
    api = await startGatewayApi({ model, bootstrap: nodes[0].addrs[0], routeTimeout: 60_000 })
    client = new OpenAI({ baseURL: `${api.gateway.url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 120_000 })
  }, 240_000)

  afterAll(async () => {
    await api?.close()
    await Promise.all(nodes.map((n) => n.stop()))
    rmSync(dir, { recursive: true, force: true })
  })

  it("renders the model's template, encodes its special tokens, and answers as the local model does", async () => {
    const res = await client.chat.completions.create({
      model: 'llama3-vocab',
      messages: [{ role: 'user', content: 'Hi' }],
      max_tokens: 5,
      temperature: 0
    })
    const m = openModelFile(model)
    const tok = createTokenizer(m.vocabulary!)
    m.close()
    const rendered = '<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n'
    const promptTokens = tok.encode(rendered, { special: true })
    expect(res.usage?.prompt_tokens).toBe(promptTokens.length)
    expect(res.usage?.completion_tokens).toBeGreaterThan(0)
    expect(promptTokens.length).toBeLessThan(tok.encode(rendered).length) // control tokens are single tokens
    const local = await localChatGreedy(model, 'Hi', res.usage?.completion_tokens ?? 0)
    expect(local.promptTokens).toEqual(promptTokens)
    expect(res.choices[0].message.content).toBe(local.completion)
    // generate --chat --bootstrap: the same prompt tokens and completion through the swarm.
    const remote = await runRemoteGenerate(
      {
        model,
        chat: true,
        bootstrap: [nodes[0].addrs[0]],
        prompt: 'Hi',
        maxTokens: res.usage?.completion_tokens ?? 0,
        temperature: 0,
        topK: 0,
        topP: 1,
        seed: 1,
        repetitionPenalty: 1,
        edgeFirst: 1,
        edgeLast: 1,
        forwarding: 'relay',
        wire: 'f32',
        canaryRate: 0,
        json: true
      },
      () => {}
    )
    expect(remote.completion).toBe(local.completion)
  })
})
