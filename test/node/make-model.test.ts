import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { createRandomModel, openModelFile, parseShape } from '../../shards/index.js'
import { runCli } from '../helpers/cli.js'

const dir = mkdtempSync(join(tmpdir(), 'layerswarm-make-model-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

describe('layerswarm make-model', () => {
  it('writes a GGUF v3 Llama file the engine opens, equal to the in-memory random model, and prints a JSON summary', () => {
    const out = join(dir, 'm.gguf')
    const r = runCli([
      'make-model',
      '--shape',
      '64,2,4,2,96,300',
      '--dtype',
      'q8_0',
      '--seed',
      '5',
      '--out',
      out,
      '--context',
      '64'
    ])
    expect(r.status).toBe(0)
    const summary = JSON.parse(r.stdout.trim().split('\n').pop() ?? '')
    expect(summary).toMatchObject({ out, dtype: 'q8_0', seed: 5 })
    expect(summary.config).toMatchObject({
      dim: 64,
      nLayers: 2,
      nHeads: 4,
      nKvHeads: 2,
      hiddenDim: 96,
      vocabSize: 300,
      seqLen: 64
    })
    const model = openModelFile(out)
    const mem = createRandomModel(parseShape('64,2,4,2,96,300'), { dtype: 'q8_0', seed: 5, seqLen: 64 })
    expect(Buffer.from(model.readMatrix('blk.1.ffn_down').data).equals(Buffer.from(mem.readMatrix('blk.1.ffn_down').data))).toBe(
      true
    )
    expect(model.vocabulary?.pieces.length).toBe(300)
    // What llama.cpp's loader requires: GGUF v3, general.architecture, llama.* hyper-parameters, an SPM vocabulary.
    expect(model.metadata.get('general.architecture')).toBe('llama')
    expect(model.metadata.get('tokenizer.ggml.model')).toBe('llama')
    for (const key of [
      'llama.block_count',
      'llama.embedding_length',
      'llama.feed_forward_length',
      'llama.attention.head_count',
      'llama.attention.head_count_kv',
      'llama.context_length'
    ]) {
      expect(model.metadata.has(key), key).toBe(true)
    }
    model.close()
    const head = readFileSync(out).subarray(0, 8)
    expect(head.toString('latin1', 0, 4)).toBe('GGUF')
    expect(head.readUInt32LE(4)).toBe(3)
  })

  it('rejects a bad shape with a typed error', () => {
    const r = runCli(['make-model', '--shape', '65,2,4,2,96,300', '--out', join(dir, 'bad.gguf')])
    expect(r.status).toBe(1)
    expect(r.stderr).toMatch(/INVALID_ARGUMENT/)
  })

  it('--arch qwen3 --head-dim and --rope-scaling llama3 write those families (metadata as llama.cpp names it)', () => {
    const q3 = join(dir, 'q3.gguf')
    const r = runCli([
      'make-model',
      '--shape',
      'tiny',
      '--arch',
      'qwen3',
      '--head-dim',
      '32',
      '--rope-theta',
      '1000000',
      '--out',
      q3
    ])
    expect(r.status, r.stderr).toBe(0)
    const summary = JSON.parse(r.stdout.trim().split('\n').pop() ?? '')
    expect(summary.config).toMatchObject({
      architecture: 'qwen3',
      headDim: 32,
      qDim: 128,
      kvDim: 64,
      qkNorm: true,
      ropeType: 'neox'
    })
    const model = openModelFile(q3)
    expect(model.metadata.get('qwen3.attention.key_length')).toBe(32)
    expect(model.metadata.get('qwen3.rope.freq_base')).toBe(1000000)
    expect(model.hasTensor('blk.0.attn_q_norm')).toBe(true)
    model.close()
    const l3 = join(dir, 'l3.gguf')
    const r3 = runCli(['make-model', '--shape', 'tiny', '--rope-scaling', 'llama3', '--rope-theta', '500000', '--out', l3])
    expect(r3.status, r3.stderr).toBe(0)
    const m3 = openModelFile(l3)
    expect(m3.hasTensor('rope_freqs')).toBe(true)
    expect(m3.config.ropeFreqFactors?.length).toBe(8)
    expect(m3.config.ropeFreqFactors?.[0]).toBe(1)
    expect(m3.config.ropeFreqFactors?.[7]).toBe(8)
    m3.close()
    const bad = runCli(['make-model', '--shape', 'tiny', '--arch', 'llama', '--head-dim', '32', '--out', join(dir, 'x.gguf')])
    expect(bad.status).not.toBe(0)
    expect(bad.stderr).toMatch(/qwen3/)
  })
})
