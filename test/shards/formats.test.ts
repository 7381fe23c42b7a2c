import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import {
  BadMagicError,
  computeModelId,
  openModelFile,
  TokenizerMismatchError,
  TruncatedFileError,
  UnsupportedModelError,
  UnsupportedTensorTypeError
} from '../../shards/index.js'
import { BIN_PATH, GGUF_PATH, TOK_PATH } from '../helpers/reference.js'

const dir = mkdtempSync(join(tmpdir(), 'layerswarm-formats-'))
const gguf = readFileSync(GGUF_PATH)
const bin = readFileSync(BIN_PATH)

function write(name: string, bytes: Uint8Array): string {
  const p = join(dir, name)
  writeFileSync(p, bytes)
  return p
}

/** Offset just past the first occurrence of a GGUF string (u64 length + bytes) in the header. */
function afterString(s: string): number {
  const at = gguf.indexOf(Buffer.from(s))
  if (at < 0) throw new Error(`${s} not in file`)
  return at + s.length
}

describe('model files: typed errors for bad input', () => {
  it('opens both bundled formats with the same config', () => {
    const a = openModelFile(GGUF_PATH)
    const b = openModelFile(BIN_PATH)
    expect(a.format).toBe('gguf')
    expect(b.format).toBe('llama2c')
    const { rmsEps: epsA, ...restA } = a.config
    const { rmsEps: epsB, ...restB } = b.config
    expect(restA).toEqual({ ...restB, tiedEmbeddings: false }) // the converter wrote an explicit output.weight
    expect(Math.fround(epsA)).toBe(Math.fround(epsB))
    expect(b.config.tiedEmbeddings).toBe(true)
    expect(a.vocabulary?.pieces.length).toBe(512)
    expect(b.vocabulary?.pieces.length).toBe(512) // found tok512.bin beside the model
    a.close()
    b.close()
  })

  it('truncated GGUF: in the header and in the tensor data', () => {
    expect(() => openModelFile(write('head.gguf', gguf.subarray(0, 3000)))).toThrow(TruncatedFileError)
    expect(() => openModelFile(write('data.gguf', gguf.subarray(0, gguf.length - 100)))).toThrow(TruncatedFileError)
    expect(() => openModelFile(write('tiny.gguf', gguf.subarray(0, 2)))).toThrow(TruncatedFileError)
  })

  it('wrong magic', () => {
    const bad = Buffer.from(gguf)
    bad.write('GGUX', 0)
    expect(() => openModelFile(write('magic.gguf', bad))).toThrow(BadMagicError)
    expect(() => openModelFile(write('notes.txt', Buffer.from('hello world, not a model')))).toThrow(BadMagicError)
    const garbage = Buffer.alloc(4096, 0xff)
    expect(() => openModelFile(write('garbage.bin', garbage))).toThrow(BadMagicError)
  })

  it('unsupported tensor type (IQ2_XXS), named with the tensor', () => {
    const bad = Buffer.from(gguf)
    const typeAt = afterString('blk.3.ffn_up.weight') + 4 + 2 * 8 // n_dims u32, ne[2] u64
    expect(bad.readUInt32LE(typeAt)).toBe(0)
    bad.writeUInt32LE(16, typeAt)
    expect(() => openModelFile(write('iq2.gguf', bad))).toThrow(UnsupportedTensorTypeError)
    expect(() => openModelFile(write('iq2.gguf', bad))).toThrow(/blk\.3\.ffn_up\.weight is IQ2_XXS/)
  })

  it('unsupported architecture', () => {
    const bad = Buffer.from(gguf)
    const valueAt = afterString('general.architecture') + 4 + 8 // type u32, length u64
    expect(bad.subarray(valueAt, valueAt + 5).toString()).toBe('llama')
    bad.write('gpt2x', valueAt)
    expect(() => openModelFile(write('arch.gguf', bad))).toThrow(UnsupportedModelError)
  })

  it('truncated and inconsistent llama2.c checkpoints', () => {
    expect(() => openModelFile(write('short.bin', bin.subarray(0, 100_000)), { tokenizerPath: TOK_PATH })).toThrow(
      TruncatedFileError
    )
    expect(() => openModelFile(write('hdr.bin', bin.subarray(0, 10)))).toThrow(TruncatedFileError)
    const v1 = Buffer.from(bin)
    v1.writeUInt32LE(0x616b3432, 0)
    expect(() => openModelFile(write('v1.bin', v1))).toThrow(UnsupportedModelError)
  })

  it('a tokenizer that does not match the model', () => {
    const tok = readFileSync(TOK_PATH)
    const extra = Buffer.alloc(4 + 4 + 3)
    extra.writeFloatLE(-1, 0)
    extra.writeInt32LE(3, 4)
    extra.write('xyz', 8)
    const bigger = write('tok513.bin', Buffer.concat([tok, extra]))
    expect(() => openModelFile(BIN_PATH, { tokenizerPath: bigger })).toThrow(TokenizerMismatchError)
    // a tokenizer of the right size found beside a model is used; a model without one has none
    const lone = join(dir, 'lone', 'model.bin')
    mkdirSync(join(dir, 'lone'), { recursive: true })
    copyFileSync(BIN_PATH, lone)
    expect(openModelFile(lone).vocabulary).toBeUndefined()
  })
})

describe('model id', () => {
  it('names the weights: stable for a file, different for other weights, cheap to compute', () => {
    const a = openModelFile(GGUF_PATH)
    const before = a.bytesRead()
    const id = computeModelId(a)
    expect(id).toMatch(/^lsm1-[0-9a-f]{40}$/)
    expect(a.bytesRead() - before).toBeLessThan(48 * 8192 + 1)
    expect(computeModelId(openModelFile(GGUF_PATH))).toBe(id)
    expect(computeModelId(openModelFile(BIN_PATH))).not.toBe(id)
    const changed = Buffer.from(gguf)
    changed[changed.length - 1] ^= 1 // the last byte of the last tensor (blk.4.ffn_norm)
    expect(computeModelId(openModelFile(write('changed.gguf', changed)))).not.toBe(id)
    a.close()
  })
})
