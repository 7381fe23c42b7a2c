/**
 * Command-line options of the benchmarks, read one way: `npm run bench -- NAME --flag value`.
 * Every option is a string flag with an optional default; a bad value is an Error that names
 * the flag (`--peers must be an integer >= 1`; bench/cli.ts prints it after `bench NAME: `).
 */
import { availableParallelism } from 'node:os'
import { parseArgs } from 'node:util'
import type { KernelKind } from '../shards/index.js'

export const KERNEL_KINDS = ['auto', 'reference', 'wasm', 'native'] as const satisfies readonly KernelKind[]
export const FORWARDINGS = ['relay', 'chain'] as const
/** Weight dtypes of a generated random model, and the wire / KV dtypes (the same three names). */
export const TENSOR_DTYPES = ['f32', 'f16', 'q8_0'] as const
export type TensorDType = (typeof TENSOR_DTYPES)[number]

/** Each option's default; undefined: none (the option may be absent). */
export type OptionDefaults = Readonly<Record<string, string | undefined>>

/** The parsed flags of one benchmark, with checked conversions. */
export class BenchArgs {
  constructor(readonly values: Readonly<Record<string, string | undefined>>) {}

  fail(message: string): never {
    throw new Error(message)
  }

  string(name: string): string | undefined {
    return this.values[name]
  }

  /** A flag that must be given (or has a default). */
  required(name: string, what: string): string {
    return this.values[name] ?? this.fail(`--${name} ${what} is required`)
  }

  /** A number >= min (an integer unless `integer` is false). */
  number(name: string, min: number, integer = true): number {
    const n = Number(this.values[name])
    if ((integer && !Number.isInteger(n)) || !Number.isFinite(n) || n < min)
      this.fail(`--${name} must be ${integer ? 'an integer' : 'a number'} >= ${min}`)
    return n
  }

  int(name: string, min: number): number {
    return this.number(name, min)
  }

  /** As number(), or undefined when the flag is absent. */
  optional(name: string, min: number, integer = true): number | undefined {
    return this.values[name] === undefined ? undefined : this.number(name, min, integer)
  }

  /** Comma-separated integers >= min. */
  intList(name: string, min: number): number[] {
    const text = this.required(name, 'list')
    return text.split(',').map((v) => new BenchArgs({ [name]: v }).int(name, min))
  }

  oneOf<T extends string>(name: string, allowed: readonly T[]): T {
    const v = this.values[name]
    if (!allowed.includes(v as T)) this.fail(`--${name} ${allowed.join('|')}`)
    return v as T
  }

  /** Kernel threads: the flag, else every core. */
  threads(name = 'threads'): number {
    return this.optional(name, 1) ?? availableParallelism()
  }
}

/** Parse `argv` for a benchmark that takes the flags of `defaults` (unknown flags are errors). */
export function benchArgs(argv: readonly string[], defaults: OptionDefaults): BenchArgs {
  const options = Object.fromEntries(
    Object.entries(defaults).map(([name, value]) => [
      name,
      value === undefined ? { type: 'string' as const } : { type: 'string' as const, default: value }
    ])
  )
  const { values } = parseArgs({ args: [...argv], options })
  return new BenchArgs(values as Record<string, string | undefined>)
}

/** Flags every swarm benchmark (swarm, load, wan) takes, with their usual defaults; each overrides some. */
export const SWARM_DEFAULTS: OptionDefaults = {
  model: undefined,
  peers: '3',
  'gen-tokens': '64',
  'prompt-tokens': '16',
  kernels: 'auto',
  threads: undefined,
  'edge-first': '1',
  'edge-last': '1',
  dtype: 'q8_0',
  seed: '1',
  'warmup-tokens': '16'
}

/** The swarm benchmarks' common settings, as SWARM_DEFAULTS' flags give them. */
export interface SwarmBenchBase {
  /** A GGUF file, or a shape (110m, 1.1b, ...) written as a random-weight model once. */
  readonly model: string
  readonly peers: number
  readonly genTokens: number
  readonly promptTokens: number
  readonly kernels: KernelKind
  readonly threads: number
  readonly edgeFirst: number
  readonly edgeLast: number
  /** Weight dtype and seed of a generated model (when `model` is a shape). */
  readonly dtype: TensorDType
  readonly seed: number
  readonly warmupTokens: number
}

/** Read SWARM_DEFAULTS' flags; `warmupMin`: the fewest warm-up tokens the benchmark accepts. */
export function swarmBenchBase(a: BenchArgs, warmupMin = 0): SwarmBenchBase {
  return {
    model: a.required('model', 'FILE or a shape (110m, 1.1b, ...)'),
    peers: a.int('peers', 1),
    genTokens: a.int('gen-tokens', 2),
    promptTokens: a.int('prompt-tokens', 1),
    kernels: a.oneOf('kernels', KERNEL_KINDS),
    threads: a.threads(),
    edgeFirst: a.int('edge-first', 0),
    edgeLast: a.int('edge-last', 0),
    dtype: a.oneOf('dtype', TENSOR_DTYPES),
    seed: a.int('seed', 0),
    warmupTokens: a.int('warmup-tokens', warmupMin)
  }
}

/** `bench collusion`'s flags (bench/collusion.ts): two colluding logging peers on a 2-hop route. */
export const COLLUSION_DEFAULTS: OptionDefaults = {
  model: 'models/stories260K.gguf',
  steps: '500',
  'max-tokens': '32',
  rate: '1',
  seed: '1',
  forwarding: 'relay,chain',
  dump: undefined
}

/** Read COLLUSION_DEFAULTS' flags. */
export function collusionOptions(a: BenchArgs): {
  model: string
  steps: number
  maxTokens: number
  rate: number
  seed: number
  forwardings: Array<(typeof FORWARDINGS)[number]>
} {
  const forwardings = (a.string('forwarding') ?? '').split(',')
  const bad = forwardings.find((f) => !(FORWARDINGS as readonly string[]).includes(f))
  if (bad !== undefined) throw new Error(`--forwarding relay|chain (a list): not ${bad}`)
  return {
    model: a.required('model', 'FILE'),
    steps: a.int('steps', 1),
    maxTokens: a.int('max-tokens', 1),
    rate: a.number('rate', 0, false),
    seed: a.int('seed', 0),
    forwardings: forwardings as Array<(typeof FORWARDINGS)[number]>
  }
}
