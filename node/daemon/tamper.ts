import { createRandom, hashSeed } from '../../canary/index.js'
import { InvalidTamperOptionsError } from '../errors.js'

/**
 * Tamper modes: how a dishonest peer may alter the outputs it returns, so the project can
 * measure its own canary detector (`layerswarm node start --tamper MODE --tamper-size S
 * --tamper-rate R`). Pure functions of (seed, sessionId, stepId, input, output): a retried step
 * is tampered the same way.
 *
 *  - noise:   add N(0, (size · rms(output))²) to every value (relative L2 drift ≈ size)
 *  - scale:   multiply every value by (1 + size) (relative L2 = |size|, direction unchanged)
 *  - zero:    set a fraction `size` ∈ (0, 1] of the values (seeded choice) to 0
 *  - skip:    return the step's input unchanged (the span was not computed); size unused
 *  - bias:    add size · rms(output) to every value
 *  - lowprec: round every value to a `size`-bit mantissa (round to nearest even on the f32
 *             bits; size 23 keeps f32, 10 is f16's precision, 3 keeps 3 bits: 1.xxx · 2^e)
 *  - replay:  return an earlier output of the same shape from another step or session (the
 *             most recent one seen); when none exists yet the output is returned as is
 * With rate < 1 a step is tampered when a uniform draw seeded by (seed, sessionId, stepId)
 * falls below the rate, so a seeded fraction of the steps is tampered. With `after` P > 0 only
 * the rows at positions ≥ P are (`--tamper-after P`): a peer that behaves early in a session,
 * where short canaries would check it, and cheats late.
 */
export type TamperMode = 'noise' | 'scale' | 'zero' | 'skip' | 'bias' | 'lowprec' | 'replay'
export const TAMPER_MODES: readonly TamperMode[] = ['noise', 'scale', 'zero', 'skip', 'bias', 'lowprec', 'replay']

export { InvalidTamperOptionsError }

export interface TamperOptions {
  readonly mode: TamperMode
  readonly size: number
  /** Fraction of steps tampered, in (0, 1]. */
  readonly rate: number
  readonly seed: number
  /** Tamper only rows at positions ≥ after (default 0: every row). */
  readonly after?: number
}

export interface TamperContext {
  readonly sessionId: string
  readonly stepId: number | string
  readonly input: Float32Array
  readonly output: Float32Array
  /** Position of the step's first row and its row count: needed when `after` > 0. */
  readonly startPosition?: number
  readonly rows?: number
}

export interface Tamper extends TamperOptions {
  readonly after: number
  /** Whether the step (sessionId, stepId) falls in the tampered fraction. */
  tampers(sessionId: string, stepId: number | string): boolean
  /** The output to return: a new array when tampered, `ctx.output` itself when not. */
  apply(ctx: TamperContext): Float32Array
}

const REPLAY_KEEP = 16

export function createTamper(options: TamperOptions): Tamper {
  const { mode, size, rate, seed } = options ?? ({} as TamperOptions)
  if (!TAMPER_MODES.includes(mode))
    throw new InvalidTamperOptionsError(`tamper mode must be one of ${TAMPER_MODES.join(', ')}, got ${mode}`)
  if (typeof rate !== 'number' || !(rate > 0 && rate <= 1))
    throw new InvalidTamperOptionsError(`tamper rate must be in (0, 1], got ${rate}`)
  if (!Number.isSafeInteger(seed)) throw new InvalidTamperOptionsError(`tamper seed must be a safe integer, got ${seed}`)
  const after = options.after ?? 0
  if (!Number.isSafeInteger(after) || after < 0)
    throw new InvalidTamperOptionsError(`tamper-after must be an integer position ≥ 0, got ${after}`)
  if (typeof size !== 'number' || !Number.isFinite(size))
    throw new InvalidTamperOptionsError(`tamper size must be a finite number, got ${size}`)
  if ((mode === 'noise' || mode === 'bias') && size <= 0) throw new InvalidTamperOptionsError(`${mode} size must be > 0`)
  if (mode === 'scale' && (size <= -1 || size === 0)) throw new InvalidTamperOptionsError('scale size must be > -1 and not 0')
  if (mode === 'zero' && !(size > 0 && size <= 1)) throw new InvalidTamperOptionsError('zero size must be a fraction in (0, 1]')
  if (mode === 'lowprec' && !(Number.isInteger(size) && size >= 0 && size <= 22)) {
    throw new InvalidTamperOptionsError('lowprec size must be a mantissa width in bits, an integer in [0, 22]')
  }
  const history = new Map<number, { key: string; data: Float32Array }[]>()
  const keyOf = (sessionId: string, stepId: number | string): string => `${sessionId}\u0000${String(stepId)}`
  const tampers = (sessionId: string, stepId: number | string): boolean =>
    rate >= 1 || createRandom(hashSeed(seed, `rate\u0000${keyOf(sessionId, stepId)}`)).next() < rate

  const remember = (key: string, data: Float32Array): void => {
    const list = history.get(data.length) ?? []
    if (list.some((e) => e.key === key)) return
    list.push({ key, data: Float32Array.from(data) })
    if (list.length > REPLAY_KEEP) list.shift()
    history.set(data.length, list)
  }

  return {
    mode,
    size,
    rate,
    seed,
    after,
    tampers,
    apply(ctx) {
      const { sessionId, stepId, input, output } = ctx ?? ({} as TamperContext)
      if (typeof sessionId !== 'string' || (typeof stepId !== 'number' && typeof stepId !== 'string')) {
        throw new InvalidTamperOptionsError('tamper context needs a sessionId string and a stepId')
      }
      if (!(input instanceof Float32Array) || !(output instanceof Float32Array)) {
        throw new InvalidTamperOptionsError('tamper context needs Float32Array input and output')
      }
      const key = keyOf(sessionId, stepId)
      let result = output
      const early = after > 0 ? rowsBefore(ctx) : 0
      const rows = ctx.rows ?? 1
      if (early < rows && tampers(sessionId, stepId)) result = tamperOutput(ctx, key, history)
      // rows before `after` are returned honestly: only the late rows of this step are altered
      if (early > 0 && result !== output) result.set(output.subarray(0, (early * output.length) / rows))
      if (mode === 'replay') remember(key, output)
      return result
    }
  }

  /** How many of the step's rows lie before `after` (all of them: nothing is tampered). */
  function rowsBefore(ctx: TamperContext): number {
    const { startPosition, rows, output } = ctx
    if (
      !Number.isSafeInteger(startPosition) ||
      !Number.isSafeInteger(rows) ||
      (rows as number) < 1 ||
      (startPosition as number) < 0 ||
      output.length % (rows as number) !== 0
    ) {
      throw new InvalidTamperOptionsError("tamper-after needs the step's startPosition and row count in the tamper context")
    }
    return Math.min(rows as number, Math.max(0, after - (startPosition as number)))
  }

  function tamperOutput(ctx: TamperContext, key: string, hist: typeof history): Float32Array {
    const { input, output } = ctx
    const rnd = createRandom(hashSeed(seed, `values\u0000${key}`))
    const out = Float32Array.from(output)
    switch (mode) {
      case 'noise': {
        const s = size * rms(output)
        for (let i = 0; i < out.length; i++) out[i] += s * rnd.normal()
        return out
      }
      case 'scale':
        for (let i = 0; i < out.length; i++) out[i] *= 1 + size
        return out
      case 'zero': {
        // Partial Fisher–Yates: exactly round(size · n) distinct positions, at least one.
        const idx = Array.from({ length: out.length }, (_, i) => i)
        const k = Math.max(1, Math.round(size * out.length))
        for (let i = 0; i < k; i++) {
          const j = i + rnd.int(idx.length - i)
          ;[idx[i], idx[j]] = [idx[j], idx[i]]
          out[idx[i]] = 0
        }
        return out
      }
      case 'skip':
        return input.length === output.length ? Float32Array.from(input) : out
      case 'bias': {
        const b = size * rms(output)
        for (let i = 0; i < out.length; i++) out[i] += b
        return out
      }
      case 'lowprec':
        return roundMantissa(out, size)
      case 'replay': {
        const list = hist.get(output.length) ?? []
        for (let i = list.length - 1; i >= 0; i--) if (list[i].key !== key) return Float32Array.from(list[i].data)
        return output
      }
    }
  }
}

function rms(x: Float32Array): number {
  let s = 0
  for (let i = 0; i < x.length; i++) s += x[i] * x[i]
  return Math.sqrt(s / Math.max(1, x.length))
}

/** Round f32 values in place to `bits` mantissa bits, to nearest even, on their bit patterns. */
export function roundMantissa(values: Float32Array, bits: number): Float32Array {
  if (!Number.isInteger(bits) || bits < 0 || bits > 23)
    throw new InvalidTamperOptionsError('mantissa bits must be an integer in [0, 23]')
  if (bits === 23) return values
  const u = new Uint32Array(values.buffer, values.byteOffset, values.length)
  const shift = 23 - bits
  const half = (1 << (shift - 1)) - 1
  const mask = ~((1 << shift) - 1) >>> 0
  for (let i = 0; i < u.length; i++) {
    const x = u[i]
    if ((x & 0x7f800000) === 0x7f800000) continue // Inf and NaN stay
    u[i] = ((x + half + ((x >>> shift) & 1)) & mask) >>> 0
  }
  return values
}
