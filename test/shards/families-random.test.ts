import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import {
  type ArchSpec,
  createFastKernels,
  createRandomModel,
  createReferenceKernels,
  createShard,
  InvalidModelError,
  openModelFile,
  parseShape,
  UnsupportedModelError,
  writeGguf,
  writeRandomModel
} from '../../shards/index.js'

// Random phi3 (fused attn_qkv and gate-up, partial rotary, longrope) and qwen3moe (stacked
// experts) files (issue 34): the file the project's writer makes reads back as the in-memory
// model, tensor by tensor, through the fused/stacked views (shards/fused-tensors.ts), and one
// forward pass of the file equals the in-memory model's bit for bit.

const dir = mkdtempSync(join(tmpdir(), 'layerswarm-families-random-'))
const SHAPE = parseShape('64,2,4,2,96,300')
const CASES: Array<{ what: string; arch: ArchSpec; dtype: 'q8_0' | 'q4_k_m' | 'f32' }> = [
  { what: 'phi3', arch: { architecture: 'phi3', ropeDims: 12, longrope: true }, dtype: 'q8_0' },
  {
    what: 'qwen3moe',
    arch: { architecture: 'qwen3moe', headDim: 32, experts: { count: 4, used: 2, hidden: 64 } },
    dtype: 'q8_0'
  },
  // Mixtral: a llama file with llama.expert_count, experts feed_forward_length wide.
  { what: 'mixtral', arch: { architecture: 'llama', experts: { count: 4, used: 2, hidden: 96 } }, dtype: 'q8_0' },
  { what: 'qwen2moe', arch: { architecture: 'qwen2moe', experts: { count: 4, used: 2, hidden: 32, shared: 64 } }, dtype: 'q8_0' }
]

describe('random phi3 / mixture-of-experts files', () => {
  for (const c of CASES) {
    it(`${c.what}: the file reads back as the in-memory model`, () => {
      const path = join(dir, `${c.what}.gguf`)
      writeRandomModel(path, SHAPE, { dtype: c.dtype, seed: 5, seqLen: 64, arch: c.arch })
      const mem = createRandomModel(SHAPE, { dtype: c.dtype, seed: 5, seqLen: 64, arch: c.arch })
      const file = openModelFile(path)
      expect(file.config).toEqual(mem.config)
      const names =
        c.what === 'phi3'
          ? (['blk.1.attn_q', 'blk.1.attn_k', 'blk.1.attn_v', 'blk.1.ffn_gate', 'blk.1.ffn_up', 'blk.1.ffn_down'] as const)
          : ([
              'blk.1.attn_q',
              'blk.1.ffn_gate_inp',
              'blk.1.ffn_gate_exps.0',
              'blk.1.ffn_up_exps.3',
              'blk.1.ffn_down_exps.2',
              ...(c.what === 'qwen2moe' ? (['blk.1.ffn_gate_shexp', 'blk.1.ffn_up_shexp', 'blk.1.ffn_down_shexp'] as const) : [])
            ] as const)
      for (const n of names)
        expect(Buffer.from(file.readMatrix(n).data).equals(Buffer.from(mem.readMatrix(n).data)), n).toBe(true)
      const run = (m: typeof mem) => {
        const shard = createShard({ model: m, start: 0, end: 2, kernels: createReferenceKernels() })
        shard.openSession('s')
        const x = new Float32Array(3 * 64).map((_, i) => Math.sin(i))
        return shard.forward('s', x, 0)
      }
      expect(Buffer.from(run(file).buffer).equals(Buffer.from(run(mem).buffer))).toBe(true)
      file.close()
    })
  }

  it('partial rotary without longrope runs in the fused native block with the op-by-op bits', () => {
    const arch: ArchSpec = { architecture: 'phi3', ropeDims: 8 }
    const model = createRandomModel(SHAPE, { dtype: 'q8_0', seed: 6, seqLen: 64, arch })
    const fast = createFastKernels({ threads: 1 })
    const plain = createFastKernels({ threads: 1, fusedBlock: false })
    const run = (kernels: ReturnType<typeof createReferenceKernels>) => {
      const shard = createShard({ model, start: 0, end: 2, kernels })
      shard.openSession('s')
      const x = new Float32Array(2 * 64).map((_, i) => Math.cos(i))
      return shard.forward('s', x, 0)
    }
    expect(Buffer.from(run(fast).buffer).equals(Buffer.from(run(plain).buffer))).toBe(true)
    fast.close?.()
    plain.close?.()
  })

  it('a llama file with a router but no llama.expert_count is refused with INVALID_MODEL', () => {
    const path = join(dir, 'mixtral-no-count.gguf')
    const u32 = (value: number) => ({ type: 'u32' as const, value })
    writeGguf(path, {
      metadata: [
        ['general.architecture', { type: 'string', value: 'llama' }],
        ['llama.embedding_length', u32(8)],
        ['llama.feed_forward_length', u32(16)],
        ['llama.block_count', u32(1)],
        ['llama.attention.head_count', u32(2)],
        ['llama.context_length', u32(16)]
      ],
      tensors: [
        { name: 'token_embd.weight', dtype: 'f32', shape: [8, 4], data: new Uint8Array(128) },
        { name: 'blk.0.ffn_gate_inp.weight', dtype: 'f32', shape: [8, 4], data: new Uint8Array(128) }
      ]
    })
    expect(() => openModelFile(path)).toThrow(InvalidModelError)
    expect(() => openModelFile(path)).toThrow(/llama needs 1 ≤ expert_used_count \(0\) ≤ expert_count \(0\)/)
  })

  it('a router in a dense family (qwen3) is refused with UNSUPPORTED_MODEL', () => {
    const path = join(dir, 'qwen3-router.gguf')
    writeRandomModel(path, SHAPE, { dtype: 'f32', seed: 5, seqLen: 64, arch: { architecture: 'qwen3' } })
    const file = openModelFile(path)
    const tensors = ['token_embd', 'blk.0.attn_q', 'blk.0.attn_k', 'blk.0.attn_v', 'blk.0.attn_output', 'blk.0.ffn_gate'] as const
    const m = (n: (typeof tensors)[number]) => file.readMatrix(n)
    const arr = [...tensors].map((n) => ({
      name: `${n}.weight`,
      dtype: 'f32' as const,
      shape: [m(n).cols, m(n).rows],
      data: m(n).data
    }))
    const meta = [...file.metadata].filter(([k]) => k.startsWith('qwen3.') || k === 'general.architecture')
    file.close()
    const routed = join(dir, 'qwen3-routed.gguf')
    writeGguf(routed, {
      metadata: meta.map(([k, v]) => [
        k,
        typeof v === 'string' ? { type: 'string', value: v } : { type: Number.isInteger(v) ? 'u32' : 'f32', value: Number(v) }
      ]),
      tensors: [...arr, { name: 'blk.0.ffn_gate_inp.weight', dtype: 'f32', shape: [64, 4], data: new Uint8Array(64 * 4 * 4) }]
    })
    expect(() => openModelFile(routed)).toThrow(UnsupportedModelError)
    expect(() => openModelFile(routed)).toThrow(/mixture of experts in a qwen3 model is not supported/)
  })
})
