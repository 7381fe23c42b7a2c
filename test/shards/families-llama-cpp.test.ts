import { spawnSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { runFamilies } from '../../bench/crosscheck/families.js'
import { llamaCppDir } from '../../bench/llama-cpp.js'

// Opt-in (LAYERSWARM_LLAMA_CPP=1, with llama.cpp built by `npm run crosscheck` into the cache
// and python3 with numpy for llama.cpp's gguf-py): issue 15's "greedy tokens equal llama.cpp's
// on files written and quantised by llama.cpp's tools" for each family, and the tokenizer
// against llama.cpp's on both vocabularies. The full matrix is `npm run crosscheck -- families`.

const dir = llamaCppDir()
const built = existsSync(join(dir, 'build', 'bin', 'llama-quantize')) && existsSync(join(dir, 'src', 'gguf-py'))
const numpy = built && spawnSync('python3', ['-c', 'import numpy'], { stdio: 'ignore' }).status === 0
const why =
  process.env.LAYERSWARM_LLAMA_CPP !== '1'
    ? 'set LAYERSWARM_LLAMA_CPP=1 to run'
    : !built
      ? `no llama.cpp build in ${dir} (npm run crosscheck builds it)`
      : !numpy
        ? 'python3 with numpy is needed for llama.cpp gguf-py'
        : ''
if (why) console.warn(`families-llama-cpp: skipped: ${why}`)

/** A greedy step where llama.cpp's top two logits are this close is a tie up to rounding. */
const NEAR_TIE = 0.05

describe.skipIf(why !== '')('families against llama.cpp (opt-in)', () => {
  it('llama3, qwen2, qwen3 at Q8_0 and Q4_K_M: llama.cpp greedy tokens; tokenize = llama.cpp', async () => {
    const r = await runFamilies({
      families: ['llama3', 'qwen2', 'qwen3'],
      types: ['Q8_0', 'Q4_K_M'],
      seeds: [4242],
      tokens: 8,
      threads: 2,
      strings: 300,
      keep: false,
      prompts: [{ text: 'Once upon a time, there was' }, { text: 'Why is the sky blue?', chat: true }],
      log: () => {}
    })
    expect(r.greedy).toHaveLength(12)
    for (const g of r.greedy) {
      expect(g.error, `${g.family} ${g.type}`).toBeUndefined()
      expect(g.promptEqual, `${g.family} ${g.type} ${g.prompt}: prompt ids`).toBe(true)
      // A difference must be a rounding near-tie: gone with f32 KV and no flash attention on both
      // sides (llama.cpp's f16 attention accumulates in f16 on AVX512-FP16), or a tie in llama.cpp.
      if (!g.equal)
        expect(g.f32KvEqual || (g.llamaMarginAtDiff ?? 1) < NEAR_TIE, `${g.family} ${g.type} ${g.prompt}: not a near tie`).toBe(
          true
        )
    }
    expect(r.tokenizer).toHaveLength(4)
    for (const t of r.tokenizer) expect(t.mismatches, `${t.vocab} special=${t.special}`).toEqual([])
  }, 1_800_000)

  it('gemma2, gemma3 at Q8_0 and Q4_K_M: llama.cpp greedy tokens for 24 steps (issue 34)', async () => {
    const r = await runFamilies({
      families: ['gemma2', 'gemma3'],
      types: ['Q8_0', 'Q4_K_M'],
      seeds: [4242],
      tokens: 24,
      threads: 2,
      strings: 0,
      keep: false,
      prompts: [{ text: 'Once upon a time, there was' }, { text: 'Why is the sky blue?', chat: true }],
      log: () => {}
    })
    expect(r.greedy).toHaveLength(8)
    for (const g of r.greedy) {
      expect(g.error, `${g.family} ${g.type}`).toBeUndefined()
      expect(g.promptEqual, `${g.family} ${g.type} ${g.prompt}: prompt ids`).toBe(true)
      expect(g.llamaCpp.length, `${g.family} ${g.type}: llama.cpp stopped early`).toBe(24)
      if (!g.equal)
        expect(g.f32KvEqual || (g.llamaMarginAtDiff ?? 1) < NEAR_TIE, `${g.family} ${g.type} ${g.prompt}: not a near tie`).toBe(
          true
        )
    }
  }, 1_800_000)
})
