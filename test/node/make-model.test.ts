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
})
