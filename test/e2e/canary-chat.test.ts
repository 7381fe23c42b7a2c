import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createClient } from '../../client/index.js'
import { chatPrompt } from '../../node/cli/chat-prompt.js'
import { type LocalNode, startLocalNode } from '../../node/cli/local-swarm.js'
import { createReferenceKernels, createTokenizer, openModelFile } from '../../shards/index.js'
import { localChatGreedy } from '../helpers/gateway-api.js'

import { writeQwenVocabModel } from '../helpers/qwen-vocab-model.js'

/*
 * Issue 16, chat sessions: a client whose prompts go through a chat template sends secret
 * canaries through the same template (client/verification/canaries/canary-template.ts). Real peers on a Qwen 3
 * vocabulary file (no BOS, control tokens in every prompt): the honest peers' answers to those
 * canaries match the client's references (no honest peer is convicted), the tamperer is, and the
 * chat answer is the one the whole model gives locally.
 *
 * Issue 31 item 4: this 151k-vocabulary file's first canary set is built in the background, so
 * the first test builds it at once (`firstAtOnceMacs: Infinity`) to test templated canaries; the
 * second is a default new client, whose first generation ends before any canary exists: its own
 * relayed steps are replayed (client/verification/own-step-replay.ts) and no tamperer's text
 * gets through (in fresh-clone CI, an end that did not wait for canaries let it through here).
 */
const FAST = ['--kernels', 'reference', '--announce-interval', '300']
const dir = mkdtempSync(join(tmpdir(), 'layerswarm-canary-chat-'))
const model = join(dir, 'qwen3-vocab.gguf')

describe('chat canaries on a templated model, real peers', () => {
  const nodes: Record<string, LocalNode> = {}

  beforeAll(async () => {
    writeQwenVocabModel(model, { layers: 4, seed: 31, seqLen: 128 })
    // the tamperer serves the whole remote span [1,3) in one hop (the cheapest route)
    nodes.tamperer = await startLocalNode({ model, layers: '1:3', args: [...FAST, '--tamper', 'noise', '--tamper-size', '0.5'] })
    const bootstrap = [nodes.tamperer.addrs[0]]
    nodes.honestA = await startLocalNode({ model, layers: '1:2', bootstrap, args: FAST })
    nodes.honestB = await startLocalNode({ model, layers: '2:3', bootstrap, args: FAST })
  }, 120_000)

  afterAll(async () => {
    await Promise.all(Object.values(nodes).map((n) => n.stop()))
    rmSync(dir, { recursive: true, force: true })
  })

  // First, so the client is new: run after the templated case below (same nodes, same home), this
  // client did not convict the tamperer (excludedPeers empty, tokens still the local model's); the
  // state carried over is not yet found (issue 31, session-3 note).
  it('a new client with no canary yet replays its first generation: the tamperer convicted, its text never released', {
    timeout: 300_000
  }, async () => {
    const file = openModelFile(model)
    const { prompt, special, template } = chatPrompt(file.metadata, createTokenizer(file.vocabulary!), 'Tell me a story.')
    file.close()
    const events: Array<Record<string, unknown>> = []
    const client = await createClient({
      bootstrap: Object.values(nodes).map((n) => n.addrs[0]),
      model,
      kernels: createReferenceKernels(),
      log: (e) => events.push(e)
    })
    try {
      await client.view.waitForRoute(1, 3, 20_000)
      const stream = client.stream(prompt, { maxTokens: 24, temperature: 0, special, promptTemplate: template })
      let r = await stream.next()
      while (!r.done) r = await stream.next()
      const result = r.value
      const local = await localChatGreedy(model, 'Tell me a story.', 24)
      expect(result.tokens).toEqual(local.tokens)
      expect(result.report.excludedPeers).toEqual([nodes.tamperer.peerId])
      // convicted at the first generation's end, by the replay of its own steps: its text rolled back
      expect(result.report.rollbacks.some((b) => b.convicted.includes(nodes.tamperer.peerId))).toBe(true)
      expect(events.some((e) => e.event === 'own-steps-checked')).toBe(true)
      for (const v of result.report.canaries) if (v.peerId !== nodes.tamperer.peerId) expect(v.excluded).toBe(false)
    } finally {
      await client.close()
    }
  })

  it('convicts the tamperer with templated canaries, no honest peer, and answers as the local model', {
    // the set at once on reference kernels and a 151k head: 232 s on a 2-core host at load 20
    timeout: 600_000
  }, async () => {
    const file = openModelFile(model)
    const { prompt, special, template } = chatPrompt(file.metadata, createTokenizer(file.vocabulary!), 'Tell me a story.')
    file.close()
    const client = await createClient({
      bootstrap: Object.values(nodes).map((n) => n.addrs[0]),
      model,
      kernels: createReferenceKernels(),
      // secret canaries (no seed), built before the first step: two, as the reference kernels build
      // a 151k-vocabulary set slowly (a grown set is built at once too)
      canaries: { rate: 0.5, count: 2, firstAtOnceMacs: Number.POSITIVE_INFINITY }
    })
    try {
      await client.view.waitForRoute(1, 3, 20_000)
      const result = await client.generate(prompt, { maxTokens: 24, temperature: 0, special, promptTemplate: template })
      const local = await localChatGreedy(model, 'Tell me a story.', 24)
      expect(result.tokens).toEqual(local.tokens)
      const { report } = result
      expect(report.excludedPeers).toEqual([nodes.tamperer.peerId])
      const sent = report.canaries.reduce((n, v) => n + v.canariesSent, 0)
      expect(sent).toBeGreaterThan(0)
      for (const v of report.canaries) if (v.peerId !== nodes.tamperer.peerId) expect(v.excluded).toBe(false)
    } finally {
      await client.close()
    }
  })
})
