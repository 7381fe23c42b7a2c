import { describe, expect, it } from 'vitest'
import {
  createEdge,
  createShard,
  InvalidArgumentError,
  OutOfCacheError,
  openModelFile,
  PositionError,
  UnknownSessionError
} from '../../shards/index.js'
import { GGUF_PATH, loadReference } from '../helpers/reference.js'

const ref = loadReference('stories260K_greedy_once_upon_a_time')
const TOKENS = ref.all_tokens.slice(0, 24)

function bitsEqual(a: Float32Array, b: Float32Array): boolean {
  if (a.length !== b.length) return false
  const ua = new Uint32Array(a.buffer, a.byteOffset, a.length)
  const ub = new Uint32Array(b.buffer, b.byteOffset, b.length)
  return ua.every((v, i) => v === ub[i])
}

describe('shards and sessions', () => {
  const model = openModelFile(GGUF_PATH)
  const edge = createEdge({ model })
  const dim = model.config.dim

  it('one batched step equals token-by-token steps, bit for bit', () => {
    const whole = createShard({ model, start: 0, end: 5 })
    whole.openSession('batch')
    whole.openSession('single')
    const batched = whole.forward('batch', edge.embed(TOKENS), 0)
    const single = new Float32Array(TOKENS.length * dim)
    TOKENS.forEach((tok, t) => {
      single.set(whole.forward('single', edge.embed([tok]), t), t * dim)
    })
    expect(bitsEqual(batched, single)).toBe(true)
    // and in chunks of uneven size (a prompt, then several tokens to verify at once)
    whole.openSession('chunks')
    const chunked = new Float32Array(TOKENS.length * dim)
    for (const [a, b] of [
      [0, 7],
      [7, 8],
      [8, 13],
      [13, 24]
    ]) {
      chunked.set(whole.forward('chunks', edge.embed(TOKENS.slice(a, b)), a), a * dim)
    }
    expect(bitsEqual(batched, chunked)).toBe(true)
  })

  it('blocks [0,2) then [2,5) give the hidden states of [0,5), bit for bit', () => {
    const whole = createShard({ model, start: 0, end: 5 })
    const a = createShard({ model, start: 0, end: 2 })
    const b = createShard({ model, start: 2, end: 5 })
    for (const s of [whole, a, b]) s.openSession('s')
    const x = edge.embed(TOKENS)
    expect(bitsEqual(whole.forward('s', x, 0), b.forward('s', a.forward('s', x, 0), 0))).toBe(true)
    const next = edge.embed([300])
    expect(
      bitsEqual(whole.forward('s', next, TOKENS.length), b.forward('s', a.forward('s', next, TOKENS.length), TOKENS.length))
    ).toBe(true)
  })

  it('rewinding a session recomputes the same outputs (rejected speculative tokens)', () => {
    const s = createShard({ model, start: 1, end: 4 })
    s.openSession('r')
    const x = edge.embed(TOKENS)
    const first = s.forward('r', x, 0)
    s.forward('r', edge.embed([5, 6, 7]), TOKENS.length) // tokens that get rejected
    expect(s.sessionLength('r')).toBe(TOKENS.length + 3)
    s.rewind('r', 10)
    const again = s.forward('r', x.subarray(10 * dim), 10)
    expect(bitsEqual(again, first.subarray(10 * dim))).toBe(true)
    // a step may also rewind implicitly by starting before the session's end
    const implicit = s.forward('r', x.subarray(20 * dim), 20)
    expect(bitsEqual(implicit, first.subarray(20 * dim))).toBe(true)
    expect(() => s.rewind('r', 99)).toThrow(PositionError)
  })

  it('sessions are isolated and errors are typed', () => {
    const s = createShard({ model, start: 0, end: 1 })
    s.openSession('a', { maxLength: 4 })
    s.openSession('b')
    const ab = s.forward('a', edge.embed([1, 2]), 0)
    expect(() => s.forward('a', edge.embed([1, 2, 3]), 2)).toThrow(OutOfCacheError)
    expect(() => s.forward('a', edge.embed([1]), 5)).toThrow(PositionError)
    expect(() => s.forward('nope', edge.embed([1]), 0)).toThrow(UnknownSessionError)
    expect(() => s.forward('a', new Float32Array(dim + 1), 0)).toThrow(InvalidArgumentError)
    expect(() => s.openSession('c', { maxLength: model.config.seqLen + 1 })).toThrow(InvalidArgumentError)
    expect(() => createShard({ model, start: 3, end: 3 })).toThrow(InvalidArgumentError)
    expect(() => createShard({ model, start: 0, end: 6 })).toThrow(InvalidArgumentError)
    expect(() => edge.embed([512])).toThrow(InvalidArgumentError)
    // the failed steps left session a intact, and b never saw a's tokens
    expect(s.sessionLength('a')).toBe(2)
    expect(s.sessionLength('b')).toBe(0)
    expect(bitsEqual(s.forward('b', edge.embed([1, 2]), 0), ab)).toBe(true)
    expect(s.closeSession('a')).toBe(true)
    expect(() => s.sessionLength('a')).toThrow(UnknownSessionError)
  })
})

describe('a shard reads only its span', () => {
  it('reads the tensors of its blocks, not the whole file', () => {
    const whole = openModelFile(GGUF_PATH)
    createShard({ model: whole, start: 0, end: 5 })
    createEdge({ model: whole })
    const wholeBytes = whole.bytesRead()

    const span = openModelFile(GGUF_PATH)
    const header = span.bytesRead()
    createShard({ model: span, start: 2, end: 3 })
    const oneBlock = span.bytesRead() - header
    const c = span.config
    const blockBytes = 4 * (2 * c.dim + 2 * c.dim * c.dim + 2 * c.kvDim * c.dim + 3 * c.hiddenDim * c.dim)
    expect(oneBlock).toBe(blockBytes)
    expect(span.bytesRead()).toBeLessThan(wholeBytes / 4)
    whole.close()
    span.close()
  })
})

describe('sub-span sessions', () => {
  it('a shard serves any sub-span of its blocks with the same bits', () => {
    const model = openModelFile(GGUF_PATH)
    const edge = createEdge({ model })
    const big = createShard({ model, start: 0, end: 5 })
    const small = createShard({ model, start: 1, end: 3 })
    big.openSession('sub', { start: 1, end: 3 })
    small.openSession('sub')
    const x = edge.embed(TOKENS)
    expect(big.sessionSpan('sub')).toEqual([1, 3])
    expect(bitsEqual(big.forward('sub', x, 0), small.forward('sub', x, 0))).toBe(true)
    expect(() => small.openSession('bad', { start: 0, end: 2 })).toThrow(InvalidArgumentError)
  })
})
