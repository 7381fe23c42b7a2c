import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type CanaryOptions, createClient } from '../../client/index.js'
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
 *
 * Either order of the two cases passes (issue 31, session 4): neither leaves state the other
 * reads (a client without `secretFile`/`trustFile` keeps its canaries and trust in memory).
 * What failed after the templated case was the route: one noisy round trip per refresh decides
 * between the tamperer's one hop and the honest pair's two, so a client sometimes never met the
 * tamperer (no conviction, the local model's tokens). Each client here counts the honest peers
 * as slow (its own load measure, client/routing/peer-load.ts), so its first route is the
 * tamperer's, whatever the round trips; after the conviction only the honest pair is left.
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

  /** A client whose first route is the tamperer's one hop (the honest pair looks slow to it). */
  const tamperedClient = async (o: { canaries?: CanaryOptions } = {}) => {
    const events: Array<Record<string, unknown>> = []
    const client = await createClient({
      bootstrap: Object.values(nodes).map((n) => n.addrs[0]),
      model,
      kernels: createReferenceKernels(),
      ...o,
      log: (e) => events.push(e)
    })
    await client.view.waitForRoute(1, 3, 20_000)
    // a minute per block, as measured: no round trip makes the two honest hops cheaper
    for (const peer of [nodes.honestA, nodes.honestB]) client.view.load.observe(peer.peerId, 60_000, 1, 1)
    const firstRoute = () =>
      ((events.find((e) => e.event === 'route')?.route ?? []) as Array<{ peerId: string }>).map((h) => h.peerId)
    return { client, events, firstRoute }
  }

  it('convicts the tamperer with templated canaries, no honest peer, and answers as the local model', {
    // the set at once on reference kernels and a 151k head: 232 s on a 2-core host at load 20
    timeout: 600_000
  }, async () => {
    const file = openModelFile(model)
    const { prompt, special, template } = chatPrompt(file.metadata, createTokenizer(file.vocabulary!), 'Tell me a story.')
    file.close()
    const { client, events, firstRoute } = await tamperedClient({
      // secret canaries (no seed), built before the first step: two, as the reference kernels build
      // a 151k-vocabulary set slowly (a grown set is built at once too). The build holds the
      // client's event loop for minutes under load; its steps' deadlines do not count that time
      // (client/session/step-deadline.ts: a timeout there banned an honest peer, NoRouteError)
      canaries: { rate: 0.5, count: 2, firstAtOnceMacs: Number.POSITIVE_INFINITY }
    })
    try {
      const result = await client.generate(prompt, { maxTokens: 24, temperature: 0, special, promptTemplate: template })
      expect(firstRoute(), JSON.stringify(events.filter((e) => e.event === 'failover'))).toEqual([nodes.tamperer.peerId])
      // no honest peer was blamed for the client's own stall
      expect(events.filter((e) => e.event === 'failover').map((e) => e.peerId)).not.toContain(nodes.honestA.peerId)
      expect(events.filter((e) => e.event === 'failover').map((e) => e.peerId)).not.toContain(nodes.honestB.peerId)
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

  // After the templated case on the same nodes: this client is still new (nothing of the first
  // client's is kept), and its first route is the tamperer's (tamperedClient).
  it('a new client with no canary yet replays its first generation: the tamperer convicted, its text never released', {
    timeout: 300_000
  }, async () => {
    const file = openModelFile(model)
    const { prompt, special, template } = chatPrompt(file.metadata, createTokenizer(file.vocabulary!), 'Tell me a story.')
    file.close()
    const { client, events, firstRoute } = await tamperedClient()
    try {
      const stream = client.stream(prompt, { maxTokens: 24, temperature: 0, special, promptTemplate: template })
      let r = await stream.next()
      while (!r.done) r = await stream.next()
      const result = r.value
      expect(firstRoute(), JSON.stringify(events.filter((e) => e.event === 'failover'))).toEqual([nodes.tamperer.peerId])
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
})
