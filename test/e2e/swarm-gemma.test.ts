import { existsSync, mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, it } from 'vitest'
import { type ArchSpec, parseShape, writeRandomModel } from '../../shards/index.js'
import { checkFamilyCli, describeFamilySwarm, PROMPT } from '../helpers/family-swarm.js'

// Gemma 2 and Gemma 3 files (issue 34) through the family swarm rig (test/helpers/family-swarm.ts):
// 3 node processes, relayed and chained, equal one process. The window of 4 positions is crossed
// many times in 24 tokens, and the blocks split so that every node holds both sliding and global
// layers (layer indices are the model's, not the span's). Then the CLI with Gemma's template.

const dir = mkdtempSync(join(tmpdir(), 'layerswarm-gemma-e2e-'))
const FILES: Array<{ what: string; path: string; arch: ArchSpec }> = [
  {
    what: 'gemma2',
    path: join(dir, 'gemma2.gguf'),
    arch: { architecture: 'gemma2', headDim: 32, slidingWindow: 4, attnSoftcap: 5, finalSoftcap: 10 }
  },
  {
    what: 'gemma3',
    path: join(dir, 'gemma3.gguf'),
    arch: { architecture: 'gemma3', headDim: 32, slidingWindow: 4, swaPattern: 3, ropeTheta: 1000000 }
  }
]
const write = (f: (typeof FILES)[number]) => () =>
  writeRandomModel(f.path, parseShape('64,6,4,2,96,300'), { dtype: 'q8_0', seed: 31, seqLen: 128, arch: f.arch })

for (const f of FILES) describeFamilySwarm({ what: f.what, path: f.path, spans: ['0:2', '2:4', '4:6'] }, write(f))

describe('gemma files through the CLI', () => {
  it('generate (plain and --chat with Gemma turns), tokenize and inspect', async () => {
    for (const f of FILES) {
      if (!existsSync(f.path)) write(f)()
      await checkFamilyCli(f.path, {
        what: f.what,
        // Gemma's template: the BOS the tokenizer adds, then "<start_of_turn>user\n…".
        chatPrompt: `<start_of_turn>user\n${PROMPT}<end_of_turn>\n<start_of_turn>model\n`,
        inspectLine: /family +GeGLU, post-norms, embeddings ×8, .*sliding window 4/
      })
    }
  }, 300_000)
})
