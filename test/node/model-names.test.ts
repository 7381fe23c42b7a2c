import { describe, expect, it } from 'vitest'
import { listenFor, parseServeSpec } from '../../node/cli/commands/node/node-serve.js'
import { BadOptionError } from '../../node/cli/errors.js'
import {
  decodeAnnouncement,
  decodeInfoResponse,
  encodeAnnouncement,
  encodeInfoResponse,
  MalformedMessageError
} from '../../protocol/index.js'
import type { Announcement, InfoResponse } from '../../protocol/types.js'
import { type ModelFile, openModelFile, parameterCount, readableModelName, sizeLabel } from '../../shards/index.js'
import { GGUF_PATH } from '../helpers/reference.js'

// Issue 33 item 5: readable model names (from GGUF metadata, on the wire) and `node serve` arguments.

type NameSource = Pick<ModelFile, 'metadata' | 'config' | 'weightDType'>

function withMeta(base: ModelFile, meta: Record<string, unknown>): NameSource {
  return { config: base.config, weightDType: base.weightDType, metadata: new Map(Object.entries(meta)) as ModelFile['metadata'] }
}

describe('readable model names', () => {
  const m = openModelFile(GGUF_PATH)

  it('from general.* metadata as llama.cpp writes it, else from the shape and dtype', () => {
    expect(readableModelName(m)).toBe(`llama ${sizeLabel(parameterCount(m.config))} F32`)
    expect(
      readableModelName(withMeta(m, { 'general.basename': 'Llama-3.2', 'general.size_label': '1B', 'general.file_type': 15 }))
    ).toBe('Llama-3.2 1B Q4_K_M')
    expect(
      readableModelName(withMeta(m, { 'general.name': 'Qwen3 8B', 'general.size_label': '8B', 'general.file_type': 7 }))
    ).toBe('Qwen3 8B 8B Q8_0')
    expect(readableModelName(withMeta(m, { 'general.name': 'x'.repeat(500) })).length).toBe(120)
    // control characters become spaces: the name goes on the wire, where they are refused
    const size = sizeLabel(parameterCount(m.config))
    expect(readableModelName(withMeta(m, { 'general.name': 'a\nb\tc\u001b[2J' }))).toBe(`a b c [2J ${size} F32`)
  })

  it('size labels as the Hub writes them', () => {
    expect(sizeLabel(8.03e9)).toBe('8B')
    expect(sizeLabel(1.24e9)).toBe('1.2B')
    expect(sizeLabel(292_800)).toBe('293K')
    expect(sizeLabel(135e6)).toBe('135M')
  })

  it('travel in announcements and info answers; control characters are refused', () => {
    const a: Announcement = {
      peerId: '12D3KooWNk1REJjfHbBEx3Tf43SvkPS7JnyTQTaRrVEt67u1Mqzy',
      modelId: 'lsm1-a27566da7bed507adae78ad14c2ed503f75923d1',
      start: 1,
      end: 4,
      throughput: 10,
      freeCacheTokens: 100,
      wireDtypes: ['f32'],
      version: '1.0.0',
      addrs: [],
      issuedAtMs: 1,
      expiresAtMs: 2,
      modelName: 'Llama-3.2 1B Q4_K_M'
    }
    expect(decodeAnnouncement(encodeAnnouncement(a)).modelName).toBe('Llama-3.2 1B Q4_K_M')
    expect(decodeAnnouncement(encodeAnnouncement({ ...a, modelName: undefined })).modelName).toBeUndefined()
    expect(() => encodeAnnouncement({ ...a, modelName: 'evil\u001b[2Jname' })).toThrow(MalformedMessageError)
    expect(() => encodeAnnouncement({ ...a, modelName: 'n'.repeat(121) })).toThrow(MalformedMessageError)
    const info: InfoResponse = {
      modelId: a.modelId,
      version: '1.0.0',
      nLayers: 5,
      dim: 64,
      start: 1,
      end: 4,
      throughput: 1,
      freeCacheTokens: 1,
      maxSessions: 1,
      activeSessions: 0,
      wireDtypes: ['f32'],
      x25519PublicKey: new Uint8Array(0),
      modelName: 'llama 293K F32'
    }
    expect(decodeInfoResponse(encodeInfoResponse(info)).modelName).toBe('llama 293K F32')
  })
})

describe('node serve arguments', () => {
  it('MODEL:a:b splits from the right, so Hub names with ":" pass', () => {
    expect(parseServeSpec('models/a.gguf:0:4')).toEqual({ model: 'models/a.gguf', layers: '0:4' })
    expect(parseServeSpec('org/repo:Q4_K_M:2:6')).toEqual({ model: 'org/repo:Q4_K_M', layers: '2:6' })
    expect(parseServeSpec('hf://org/repo/f.gguf:1:3')).toEqual({ model: 'hf://org/repo/f.gguf', layers: '1:3' })
    expect(() => parseServeSpec('a.gguf')).toThrow(BadOptionError)
    expect(() => parseServeSpec('a.gguf:1')).toThrow(BadOptionError)
  })

  it('a fixed port moves by one per span; port 0 stays 0', () => {
    expect(listenFor(['/ip4/0.0.0.0/tcp/4001'], 2)).toEqual(['/ip4/0.0.0.0/tcp/4003'])
    expect(listenFor(['/ip4/127.0.0.1/tcp/0'], 1)).toEqual(['/ip4/127.0.0.1/tcp/0'])
  })
})
