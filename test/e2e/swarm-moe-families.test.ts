import { existsSync, mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, it } from 'vitest'
import { type ArchSpec, parseShape, writeRandomModel } from '../../shards/index.js'
import { checkFamilyCli, describeFamilySwarm } from '../helpers/family-swarm.js'

// Mixtral-style (a llama file with llama.expert_count, 8 experts, 2 per token, renormalised) and
// qwen2moe (8 experts, 2 per token, not renormalised, plus the sigmoid-gated shared expert)
// files (issue 34) through the family swarm rig (test/helpers/family-swarm.ts): 3 node
// processes, relayed and chained, equal one process bit for bit; each node holds all experts of
// its blocks. Then generate, tokenize and inspect through the CLI.

const dir = mkdtempSync(join(tmpdir(), 'layerswarm-moe-families-e2e-'))
const FILES: Array<{ what: string; path: string; shape: string; arch: ArchSpec; inspectLine: RegExp }> = [
  {
    what: 'llama',
    path: join(dir, 'mixtral.gguf'),
    shape: '64,6,4,2,96,300',
    arch: { architecture: 'llama', experts: { count: 8, used: 2, hidden: 96 } },
    inspectLine: /experts +2 of 8 per token, expert ffn 96, top-k weights renormalised\n/
  },
  {
    what: 'qwen2moe',
    path: join(dir, 'qwen2moe.gguf'),
    shape: '64,6,4,2,96,300,untied',
    arch: { architecture: 'qwen2moe', experts: { count: 8, used: 2, hidden: 32, shared: 64 } },
    inspectLine: /experts +2 of 8 per token, expert ffn 32, shared expert ffn 64 \(sigmoid-gated\)/
  }
]
const write = (f: (typeof FILES)[number]) => () =>
  writeRandomModel(f.path, parseShape(f.shape), { dtype: 'q8_0', seed: 43, seqLen: 128, arch: f.arch })

for (const f of FILES) describeFamilySwarm({ what: f.what, path: f.path, spans: ['0:2', '2:4', '4:6'] }, write(f))

describe('Mixtral-style and qwen2moe files through the CLI', () => {
  it('generate, tokenize and inspect', async () => {
    for (const f of FILES) {
      if (!existsSync(f.path)) write(f)()
      await checkFamilyCli(f.path, { what: f.what, inspectLine: f.inspectLine })
    }
  }, 300_000)
})
