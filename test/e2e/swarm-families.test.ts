import { existsSync, mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, it } from 'vitest'
import { parseShape, writeRandomModel } from '../../shards/index.js'
import { checkFamilyCli, describeFamilySwarm } from '../helpers/family-swarm.js'

// A qwen3-shaped model (Q/K norms, head size 32 over dim 64, NEOX RoPE) through the family swarm
// rig (test/helpers/family-swarm.ts): 3 node processes, relayed and chained, equal one process,
// with the client running block 0 itself; canaries convict no honest peer. Plus `layerswarm
// generate` on qwen2/qwen3.

const dir = mkdtempSync(join(tmpdir(), 'layerswarm-families-'))
const QWEN3 = join(dir, 'qwen3.gguf')
const QWEN2 = join(dir, 'qwen2.gguf')
const shape = parseShape('64,5,4,2,96,300')

const writeQwen3 = () =>
  writeRandomModel(QWEN3, shape, { dtype: 'q8_0', seed: 21, seqLen: 128, arch: { architecture: 'qwen3', headDim: 32 } })
describeFamilySwarm({ what: 'qwen3', path: QWEN3, spans: ['0:2', '2:4', '3:5'], edgeFirst: 1 }, writeQwen3)

describe('qwen files through the CLI', () => {
  it('layerswarm generate, tokenize and inspect run qwen2 and qwen3 files', async () => {
    if (!existsSync(QWEN3)) writeQwen3()
    writeRandomModel(QWEN2, shape, { dtype: 'f16', seed: 22, seqLen: 128, arch: { architecture: 'qwen2' } })
    for (const [what, path] of [
      ['qwen2', QWEN2],
      ['qwen3', QWEN3]
    ] as const)
      await checkFamilyCli(path, { what })
  }, 300_000)
})
