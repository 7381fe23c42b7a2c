import { existsSync } from 'node:fs'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createClient } from '../../client/index.js'
import { type LocalNode, startLocalNode } from '../../node/cli/local-swarm.js'
import {
  createEdge,
  createLocalPipeline,
  createReferenceKernels,
  createShard,
  createTokenizer,
  generateTokens,
  openModelFile
} from '../../shards/index.js'
import { runCli } from './cli.js'

// The one rig of the model-family swarm tests (issue 34; swarm-gemma, swarm-families,
// swarm-phi3-moe): a family's file served by 3 node processes on 127.0.0.1, relayed and
// chained, must give one process's greedy tokens and every step's logits bit for bit, and an
// honest swarm with canaries on must not be convicted; then the CLI's generate (plain and
// --chat with the family's template), tokenize and inspect on the file.

export const N_TOKENS = 24
export const PROMPT = 'once upon a time'
const FAST = ['--kernels', 'reference', '--announce-interval', '300']

export interface FamilyFile {
  /** Architecture name, as `inspect` prints it. */
  readonly what: string
  readonly path: string
  /** The 3 nodes' spans ('a:b'); the first node is the bootstrap. */
  readonly spans: readonly [string, string, string]
  /** Blocks the client runs itself before the swarm's (default 0). */
  readonly edgeFirst?: number
}

export async function localRun(path: string): Promise<{ tokens: number[]; logits: Float32Array[] }> {
  const model = openModelFile(path)
  const edge = createEdge({ model })
  const shard = createShard({ model, start: 0, end: model.config.nLayers })
  const tokenizer = createTokenizer(model.vocabulary!)
  const tokens: number[] = []
  const logits: Float32Array[] = []
  for await (const t of generateTokens({
    temperature: 0,
    edge,
    pipeline: createLocalPipeline([shard], 'local', 128),
    promptTokens: tokenizer.encode(PROMPT),
    maxTokens: N_TOKENS,
    stopIds: tokenizer.stopIds,
    onLogits: (l) => logits.push(Float32Array.from(l))
  })) {
    tokens.push(t)
  }
  model.close()
  return { tokens, logits }
}

const same = (a: Float32Array, b: Float32Array): boolean => Buffer.from(a.buffer).equals(Buffer.from(b.buffer))

/** Registers the swarm tests of one file (written by `write` in a beforeAll). */
export function describeFamilySwarm(f: FamilyFile, write: () => void): void {
  describe(`${f.what} end to end`, () => {
    const nodes: LocalNode[] = []
    let bootstrap: string[]

    beforeAll(async () => {
      if (!existsSync(f.path)) write()
      nodes.push(await startLocalNode({ model: f.path, layers: f.spans[0], args: FAST }))
      bootstrap = [nodes[0].addrs[0]]
      nodes.push(
        ...(await Promise.all(f.spans.slice(1).map((layers) => startLocalNode({ model: f.path, layers, bootstrap, args: FAST }))))
      )
    }, 120_000)

    afterAll(async () => {
      await Promise.all(nodes.map((n) => n.stop()))
    })

    for (const forwarding of ['relay', 'chain'] as const) {
      it(`${f.what}, 3 node processes, ${forwarding}: the greedy tokens and logits of one process`, {
        timeout: 300_000
      }, async () => {
        const local = await localRun(f.path)
        const client = await createClient({
          bootstrap,
          model: f.path,
          kernels: createReferenceKernels(),
          routeTimeoutMs: 60_000,
          edgeFirst: f.edgeFirst ?? 0,
          edgeLast: 0,
          forwarding
        })
        try {
          const logits: Float32Array[] = []
          const result = await client.generate(PROMPT, {
            maxTokens: N_TOKENS,
            temperature: 0,
            onLogits: (l) => logits.push(Float32Array.from(l))
          })
          // Random weights may repeat a token: every step's logits must match bit for bit too.
          expect(result.tokens).toEqual(local.tokens)
          expect(result.tokens.length).toBe(N_TOKENS)
          expect(logits.length).toBe(local.logits.length)
          logits.forEach((l, i) => {
            expect(same(l, local.logits[i]), `step ${i}`).toBe(true)
          })
          expect(result.report.failovers).toBe(0)
          expect(result.report.receipts.invalid).toBe(0)
          expect(new Set(nodes.map((n) => n.modelId)).size).toBe(1)
        } finally {
          await client.close()
        }
      })
    }

    it(`${f.what} with canaries on: an honest swarm is not convicted`, { timeout: 300_000 }, async () => {
      const local = await localRun(f.path)
      const client = await createClient({
        bootstrap,
        model: f.path,
        kernels: createReferenceKernels(),
        routeTimeoutMs: 60_000,
        canaries: { rate: 0.5, seed: 3 }
      })
      try {
        const result = await client.generate(PROMPT, { maxTokens: N_TOKENS, temperature: 0 })
        expect(result.tokens).toEqual(local.tokens)
        expect(result.report.canaries.length).toBeGreaterThan(0)
        expect(result.report.excludedPeers).toEqual([])
        expect(result.report.canaries.every((v) => !v.excluded)).toBe(true)
      } finally {
        await client.close()
      }
    })
  })
}

/**
 * `generate` (plain, and `--chat` when `chatPrompt` gives the family's rendered turn),
 * `tokenize` and `inspect` (its output matching `inspectLine`) on a written file.
 */
export async function checkFamilyCli(path: string, o: { what: string; chatPrompt?: string; inspectLine?: RegExp }) {
  const gen = (extra: string[]) =>
    runCli([
      'generate',
      ...['--model', path, '--prompt', PROMPT, '--max-tokens', String(N_TOKENS), '--temperature', '0'],
      ...['--kernels', 'reference', '--json', ...extra]
    ])
  const plain = gen([])
  expect(plain.status, plain.stderr).toBe(0)
  expect(JSON.parse(plain.stdout).tokens).toEqual((await localRun(path)).tokens)
  const model = openModelFile(path)
  const tok = createTokenizer(model.vocabulary!)
  model.close()
  if (o.chatPrompt !== undefined) {
    const chat = gen(['--chat'])
    expect(chat.status, chat.stderr).toBe(0)
    expect(JSON.parse(chat.stdout).promptTokens).toEqual(tok.encode(o.chatPrompt, { special: true }))
  }
  const t = runCli(['tokenize', '--model', path, '--json', '--text', PROMPT])
  expect(t.status, t.stderr).toBe(0)
  expect(JSON.parse(t.stdout).ids).toEqual(tok.encode(PROMPT))
  const ins = runCli(['inspect', '--model', path])
  expect(ins.status, ins.stderr).toBe(0)
  expect(ins.stdout).toContain(`architecture  ${o.what}`)
  if (o.inspectLine) expect(ins.stdout).toMatch(o.inspectLine)
}
