import { existsSync, mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, it } from 'vitest'
import { type ArchSpec, parseShape, writeRandomModel } from '../../shards/index.js'
import { checkFamilyCli, describeFamilySwarm, PROMPT } from '../helpers/family-swarm.js'

// Phi-3 (fused attn_qkv and gate-up, partial rotary 12 of 16 dims, longrope factors and attn
// factor) and Qwen3-MoE (8 experts, 2 per token, stacked expert tensors) files (issue 34) through
// the family swarm rig (test/helpers/family-swarm.ts): 3 node processes, relayed and chained,
// equal one process bit for bit; each node holds all experts of its blocks. Then the CLI, with
// Phi-3's own chat template.

const dir = mkdtempSync(join(tmpdir(), 'layerswarm-phi3-moe-e2e-'))
const FILES: Array<{ what: string; path: string; arch: ArchSpec; inspectLine: RegExp }> = [
  {
    what: 'phi3',
    path: join(dir, 'phi3.gguf'),
    arch: { architecture: 'phi3', ropeDims: 12, longrope: true },
    inspectLine: /rope +θ 10000, rotary 12 of 16 dims, 6 freq factors, magnitude 1\.1902/
  },
  {
    what: 'qwen3moe',
    path: join(dir, 'qwen3moe.gguf'),
    arch: { architecture: 'qwen3moe', headDim: 32, experts: { count: 8, used: 2, hidden: 64 } },
    inspectLine: /experts +2 of 8 per token, expert ffn 64, top-k weights renormalised/
  }
]
const write = (f: (typeof FILES)[number]) => () =>
  writeRandomModel(f.path, parseShape('64,6,4,2,96,300'), { dtype: 'q8_0', seed: 41, seqLen: 128, arch: f.arch })

for (const f of FILES) describeFamilySwarm({ what: f.what, path: f.path, spans: ['0:2', '2:4', '4:6'] }, write(f))

describe('phi3 and qwen3moe files through the CLI', () => {
  it('generate (plain, and --chat with Phi-3 turns), tokenize and inspect', async () => {
    for (const f of FILES) {
      if (!existsSync(f.path)) write(f)()
      await checkFamilyCli(f.path, {
        what: f.what,
        ...(f.what === 'phi3' ? { chatPrompt: `<|user|>\n${PROMPT}<|end|>\n<|assistant|>\n` } : {}),
        inspectLine: f.inspectLine
      })
    }
  }, 300_000)
})
