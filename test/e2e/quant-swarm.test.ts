import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type LocalNode, startLocalNode } from '../../node/cli/local-swarm.js'
import { parseShape, writeRandomModel } from '../../shards/formats/random-model.js'
import { cliAsync } from '../helpers/cli-async.js'

// Real node processes on a llama.cpp-style Q4_K_M file (shards/quant/file-types.ts mixture:
// rows of 128 fall back to Q5_0/Q8_0, ffn_down rows of 256 stay Q4_K/Q6_K) with a q8_0 KV
// cache, and nodes refusing to start on bad files. dim 128 keeps every process on the
// reference kernels (shards/kernels/kernel-policy.ts), so the swarm must give one process's tokens.

const dir = mkdtempSync(join(tmpdir(), 'layerswarm-quant-swarm-'))
const model = join(dir, 'q4km.gguf')

const cli = (args: string[], timeoutMs = 90_000) => cliAsync(args, timeoutMs)

/** A copy of the model with one tensor's type id replaced. */
function withType(name: string, id: number): string {
  const b = Buffer.from(readFileSync(model))
  const at = b.indexOf(Buffer.from(name)) + name.length + 4 + 2 * 8 // n_dims u32, ne[2] u64
  b.writeUInt32LE(id, at)
  const p = join(dir, `type-${id}.gguf`)
  writeFileSync(p, b)
  return p
}

describe('block types and q8_0 KV over real node processes', () => {
  const nodes: LocalNode[] = []
  beforeAll(async () => {
    writeRandomModel(model, parseShape('128,4,4,2,256,600,untied'), { dtype: 'q4_k_m', seed: 3 })
    nodes.push(await startLocalNode({ model, layers: '1:3', args: ['--kv-dtype', 'q8_0', '--announce-interval', '300'] }))
  }, 60_000)
  afterAll(async () => {
    await Promise.all(nodes.map((n) => n.stop()))
    rmSync(dir, { recursive: true, force: true })
  })

  it('greedy tokens through the swarm equal one process', { timeout: 120_000 }, async () => {
    const args = ['--model', model, '--prompt', 'once upon a time', '--max-tokens', '12', '--temperature', '0', '--json']
    const local = await cli(['generate', ...args, '--kv-dtype', 'q8_0'])
    expect(local.stderr).toBe('')
    const remote = await cli(['generate', ...args, '--kv-dtype', 'q8_0', '--bootstrap', nodes[0].addrs[0], '--canary-rate', '0'])
    expect(remote.stderr).toBe('')
    expect(JSON.parse(remote.stdout).tokens).toEqual(JSON.parse(local.stdout).tokens)
    expect(JSON.parse(local.stdout).tokens.length).toBeGreaterThan(0)
  })

  it('a node refuses to start on a truncated file, an unknown type id or a size mismatch', { timeout: 120_000 }, async () => {
    const truncated = join(dir, 'truncated.gguf')
    const bytes = readFileSync(model)
    writeFileSync(truncated, bytes.subarray(0, bytes.length - 1000))
    const cases: Array<[string, string]> = [
      [truncated, 'TRUNCATED_FILE'],
      [withType('blk.2.ffn_up.weight', 99), 'UNKNOWN_TENSOR_TYPE'],
      [withType('blk.2.ffn_up.weight', 8), 'TENSOR_SIZE_MISMATCH'], // Q5_0 stored, Q8_0 declared
      [withType('blk.2.ffn_up.weight', 20), 'UNSUPPORTED_TENSOR_TYPE'] // IQ4_NL
    ]
    for (const [file, code] of cases) {
      const r = await cli(['node', 'start', '--model', file, '--layers', '0:4', '--listen', '/ip4/127.0.0.1/tcp/0'])
      expect(r.status, code).toBe(1)
      expect(r.stdout, code).toBe('') // never the serving JSON line
      const lines = r.stderr.trim().split('\n')
      expect(lines.at(-1), code).toContain(`(${code})`)
    }
  })
})
