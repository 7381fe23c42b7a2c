import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type LocalNode, startLocalNode } from '../../node/cli/local-swarm.js'
import { parseShape, writeRandomModel } from '../../shards/index.js'
import { cliAsync } from '../helpers/cli-async.js'
import { honestTokens } from '../helpers/honest-tokens.js'

// Issue #35 item 4 / issue 33 item 4: a thin client (`generate --model-id`) whose head runs on a
// peer fetches only the head chunks that hold its secret rows, not the whole head, and still gives
// one process's greedy tokens. The bundled stories260K ties its head to the embeddings (which the
// client fetches whole), so this uses a random model with an untied f32 head of 4 MiB (4 chunks of
// 1 MiB, 4096 rows each). One node process on 127.0.0.1 holds the file, serves blocks [1, 3) and the
// head, and seeds the chunks.

const dir = mkdtempSync(join(tmpdir(), 'layerswarm-thin-head-'))
const path = join(dir, 'untied.gguf')
const PROMPT = 'once upon a time'
const N_TOKENS = 12
const FAST = ['--kernels', 'reference', '--announce-interval', '300']

interface GenerateJson {
  tokens: number[]
  weights: {
    fileBytes: number
    fetchedBytes: number
    head?: { chunks: number; ofChunks: number; bytes: number; ofBytes: number }
  }
  head?: {
    steps: number
    convicted: string[]
    memory: { rowsHeld: number; rowsBytes: number; storedBytesRead: number; fullHeadBytes: number; edgeHeadBytes: number }
  }
}

describe('a thin client with the head on a peer fetches only some head chunks (node process on 127.0.0.1)', () => {
  let node: LocalNode
  let contentId = ''
  const homes: string[] = []
  const generate = (extra: string[]) => {
    const h = mkdtempSync(join(tmpdir(), 'thin-head-home-'))
    homes.push(h)
    const args = ['generate', '--model-id', contentId, '--bootstrap', node.addrs[0], '--prompt', PROMPT]
    return cliAsync(
      args.concat([
        '--max-tokens',
        String(N_TOKENS),
        '--temperature',
        '0',
        '--canary-rate',
        '0',
        '--kernels',
        'reference',
        '--json',
        ...extra
      ]),
      170_000,
      { ...process.env, LAYERSWARM_HOME: h, HOME: h }
    )
  }

  beforeAll(async () => {
    // dim 64, 3 blocks, vocabulary 16384, untied: embeddings and head 4 MiB each in f32
    writeRandomModel(path, parseShape('64,3,4,2,96,16384,untied'), { dtype: 'f32', seed: 43, seqLen: 128 })
    node = await startLocalNode({ model: path, layers: '1:3', args: FAST })
    contentId = (node as unknown as { contentId: string }).contentId
  }, 120_000)

  afterAll(async () => {
    await node?.stop()
    for (const h of homes) rmSync(h, { recursive: true, force: true })
    rmSync(dir, { recursive: true, force: true })
  })

  it('generate --model-id --head remote: one process greedy tokens, fewer bytes than the head local', {
    timeout: 360_000
  }, async () => {
    const local = await honestTokens(PROMPT, N_TOKENS, path)
    const thin = await generate(['--head', 'remote'])
    expect(thin.stderr).not.toMatch(/layerswarm:.*\(/)
    expect(thin.status).toBe(0)
    const r = JSON.parse(thin.stdout) as GenerateJson
    expect(r.tokens).toEqual(local)
    // one head chunk of four holds the 1024 secret rows; only it was fetched
    expect(r.weights.head).toEqual({ chunks: 1, ofChunks: 4, bytes: 1 << 20, ofBytes: 16384 * 64 * 4 })
    expect(r.head?.steps).toBeGreaterThan(0)
    expect(r.head?.convicted).toEqual([])
    expect(r.head?.memory.fullHeadBytes).toBe(16384 * 64 * 4)
    expect(r.head?.memory.rowsHeld).toBeGreaterThanOrEqual(1024)
    expect(r.head?.memory.rowsHeld).toBeLessThanOrEqual(4096)
    // the rows alone were read: each row's stored bytes once, never the whole head
    expect(r.head?.memory.storedBytesRead).toBe(r.head!.memory.rowsHeld * 64 * 4)
    expect(r.head?.memory.edgeHeadBytes).toBe(0)

    // the same split with the head local: the head is the only difference
    const full = await generate(['--edge-last', '0'])
    expect(full.status).toBe(0)
    const f = JSON.parse(full.stdout) as GenerateJson
    expect(f.tokens).toEqual(local)
    expect(f.weights.head).toBeUndefined()
    // three of the head's four chunks are not fetched
    expect(f.weights.fetchedBytes - r.weights.fetchedBytes).toBe(3 * (1 << 20))
    expect(r.weights.fileBytes).toBe(f.weights.fileBytes)
  })

  it('canaries on without a bank: the head comes whole, and the client says why (head-fetched-whole)', {
    timeout: 360_000
  }, async () => {
    const r = await generate(['--head', 'remote', '--canary-rate', '0.05', '--verbose'])
    expect(r.status, r.stderr).toBe(0)
    const out = JSON.parse(r.stdout) as GenerateJson
    expect(out.weights.head).toBeUndefined()
    expect(r.stderr).toContain('"event":"head-fetched-whole"')
    expect(r.stderr).toContain('--canary-bank')
  })

  it('generate --model FILE --head remote: the client reads its head rows alone, never the head matrix', {
    timeout: 180_000
  }, async () => {
    const r = await cliAsync(
      ['generate', '--model', path, '--bootstrap', node.addrs[0], '--prompt', PROMPT, '--head', 'remote'].concat([
        '--max-tokens',
        String(N_TOKENS),
        '--temperature',
        '0',
        '--canary-rate',
        '0',
        '--kernels',
        'reference',
        '--json'
      ]),
      170_000
    )
    expect(r.status).toBe(0)
    const j = JSON.parse(r.stdout) as GenerateJson
    expect(j.tokens).toEqual(await honestTokens(PROMPT, N_TOKENS, path))
    // the secret sample is drawn from the whole vocabulary; context rows join it
    expect(j.head?.memory.rowsHeld).toBeGreaterThanOrEqual(1024)
    expect(j.head?.memory.storedBytesRead).toBe(j.head!.memory.rowsHeld * 64 * 4)
    expect(j.head?.memory.edgeHeadBytes).toBe(0)
  })
})
