import { describe, expect, test } from 'vitest'
import {
  benchArgs,
  COLLUSION_DEFAULTS,
  collusionOptions,
  KERNEL_KINDS,
  SWARM_DEFAULTS,
  swarmBenchBase,
  TENSOR_DTYPES
} from '../../bench/options.js'

// bench/options.ts: the one parser of every benchmark's flags (issue #20: each benchmark had its own copy).
describe('bench options', () => {
  test('defaults fill absent flags; given flags win; numbers, lists and choices are checked', () => {
    const a = benchArgs(['--peers', '2', '--busy-poll', '0,5', '--rate', '0.25'], {
      peers: '3',
      tokens: '8',
      'busy-poll': '0',
      rate: undefined,
      model: undefined
    })
    expect(a.int('peers', 1)).toBe(2)
    expect(a.int('tokens', 1)).toBe(8)
    expect(a.intList('busy-poll', 0)).toEqual([0, 5])
    expect(a.number('rate', 0, false)).toBe(0.25)
    expect(a.optional('model', 0)).toBeUndefined()
    expect(a.string('model')).toBeUndefined()
    expect(() => a.int('rate', 0)).toThrow('--rate must be an integer >= 0')
    expect(() => a.required('model', 'FILE')).toThrow('--model FILE is required')
  })

  test('bad values name the flag', () => {
    const a = benchArgs(['--peers', '0', '--kernels', 'gpu', '--list', '1,x'], { peers: '3', kernels: 'auto', list: '1' })
    expect(() => a.int('peers', 1)).toThrow('--peers must be an integer >= 1')
    expect(() => a.oneOf('kernels', KERNEL_KINDS)).toThrow('--kernels auto|reference|wasm|native')
    expect(() => a.intList('list', 0)).toThrow('--list must be an integer >= 0')
    expect(() => benchArgs(['--nope', '1'], { peers: '3' })).toThrow()
  })

  test('the swarm benchmarks read their common flags alike', () => {
    const base = swarmBenchBase(benchArgs(['--model', 'm.gguf', '--threads', '2', '--dtype', 'f16'], SWARM_DEFAULTS))
    expect(base).toEqual({
      model: 'm.gguf',
      peers: 3,
      genTokens: 64,
      promptTokens: 16,
      kernels: 'auto',
      threads: 2,
      edgeFirst: 1,
      edgeLast: 1,
      dtype: 'f16',
      seed: 1,
      warmupTokens: 16
    })
    expect(TENSOR_DTYPES).toEqual(['f32', 'f16', 'q8_0'])
    expect(() => swarmBenchBase(benchArgs([], SWARM_DEFAULTS))).toThrow('--model FILE or a shape')
  })

  test('bench collusion reads its flags (issue #39)', () => {
    expect(collusionOptions(benchArgs([], COLLUSION_DEFAULTS))).toEqual({
      model: 'models/stories260K.gguf',
      steps: 500,
      maxTokens: 32,
      rate: 1,
      seed: 1,
      forwardings: ['relay', 'chain']
    })
    const given = collusionOptions(benchArgs(['--forwarding', 'chain', '--steps', '600'], COLLUSION_DEFAULTS))
    expect([given.forwardings, given.steps]).toEqual([['chain'], 600])
    expect(() => collusionOptions(benchArgs(['--forwarding', 'relay,ring'], COLLUSION_DEFAULTS))).toThrow('not ring')
    expect(() => collusionOptions(benchArgs(['--steps', '0'], COLLUSION_DEFAULTS))).toThrow('--steps must be an integer >= 1')
  })
})
