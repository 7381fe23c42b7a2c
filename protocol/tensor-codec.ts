/**
 * Activations on the wire (docs/protocol.md): f32 (bit-exact, little-endian), f16 (round to
 * nearest even) and Q8_0 (GGUF's blockwise int8: per 32 values one f16 scale + 32 int8).
 *
 * Rule for non-finite values: activations must be finite. encodeTensor refuses NaN/±Inf
 * and values that overflow the wire dtype (|x| > 65504 for f16), and decodeTensor refuses
 * tensors that decode to NaN/±Inf, both with NonFiniteTensorError (code MALFORMED). A
 * NaN means a broken or hostile peer; passing it on would only poison later blocks.
 */
import { endianness } from 'node:os'
import { f16Table, f16ToF32, f32ToF16 } from '../shards/f16.js'
import { BadShapeError, MalformedMessageError, MessageTooLargeError, NonFiniteTensorError } from './errors.js'
import { MAX_TENSOR_ELEMENTS, MAX_TENSOR_RANK } from './limits.js'
import type { DType, Tensor } from './types.js'

export const Q8_0_BLOCK = 32
export const Q8_0_BLOCK_BYTES = 34
const LITTLE_ENDIAN = endianness() === 'LE'

// ---- IEEE 754 binary16: one module for the engine and the wire (issue 36), shards/f16.ts ----

export { f16Table, f16ToF32, f32ToF16 }

/** ggml's roundf: halves round away from zero. */
function roundHalfAway(x: number): number {
  return x < 0 ? -Math.floor(-x + 0.5) : Math.floor(x + 0.5)
}

// ---- shapes ----

/** Validates a shape and returns its element count. */
export function shapeElements(shape: readonly number[], maxElements = MAX_TENSOR_ELEMENTS): number {
  if (shape.length === 0 || shape.length > MAX_TENSOR_RANK) {
    throw new BadShapeError(`tensor rank ${shape.length} is outside [1, ${MAX_TENSOR_RANK}]`)
  }
  let n = 1
  for (const d of shape) {
    if (!Number.isInteger(d) || d < 1) throw new BadShapeError(`tensor dimension ${d} is not a positive integer`)
    n *= d
    // checked per dimension so the product never leaves the safe-integer range
    if (n > maxElements) throw new MessageTooLargeError(`tensor of shape [${shape.join(', ')}] exceeds ${maxElements} elements`)
  }
  return n
}

/** Bytes of data a tensor of this shape and dtype carries (Q8_0 pads each row to 32). */
export function tensorByteLength(shape: readonly number[], dtype: DType, maxElements = MAX_TENSOR_ELEMENTS): number {
  const n = shapeElements(shape, maxElements)
  switch (dtype) {
    case 'f32':
      return n * 4
    case 'f16':
      return n * 2
    case 'q8_0': {
      const row = shape[shape.length - 1]
      return (n / row) * Math.ceil(row / Q8_0_BLOCK) * Q8_0_BLOCK_BYTES
    }
    default:
      throw new MalformedMessageError(`unknown dtype ${String(dtype)}`)
  }
}

/** Structural check of a tensor: shape bounds and data length exactly matching. */
export function validateTensor(t: Tensor, maxElements = MAX_TENSOR_ELEMENTS): number {
  const bytes = tensorByteLength(t.shape, t.dtype, maxElements)
  if (t.data.byteLength !== bytes) {
    throw new MalformedMessageError(
      `tensor [${t.shape.join(', ')}] ${t.dtype} needs ${bytes} bytes of data, got ${t.data.byteLength}`
    )
  }
  return shapeElements(t.shape, maxElements)
}

export interface TensorExpectation {
  /** Expected shape; undefined entries match any size (e.g. [undefined, dim]). */
  shape?: ReadonlyArray<number | undefined>
  /** Decode into this array (its first n elements) instead of allocating. */
  out?: Float32Array
  maxElements?: number
}

/** Throws BadShapeError unless `shape` matches `expected` (undefined = any). */
export function expectShape(shape: readonly number[], expected: ReadonlyArray<number | undefined>): void {
  const ok = shape.length === expected.length && expected.every((d, i) => d === undefined || d === shape[i])
  if (!ok) {
    const want = expected.map((d) => (d === undefined ? '*' : String(d))).join(', ')
    throw new BadShapeError(`tensor shape [${shape.join(', ')}] does not match [${want}]`)
  }
}

// ---- encode ----

/**
 * Packs activations for the wire as f32, f16 or q8_0 (docs/protocol.md, "Tensors and wire dtypes"); non-finite values throw.
 *
 * @example
 * ```ts
 * const t = encodeTensor(new Float32Array([0.5, -1]), [1, 2], 'f16')
 * decodeTensor(t) // Float32Array [0.5, -1]
 * ```
 */
export function encodeTensor(values: Float32Array, shape: number[], dtype: DType): Tensor {
  const n = shapeElements(shape)
  if (values.length !== n) throw new BadShapeError(`${values.length} values do not fill shape [${shape.join(', ')}]`)
  for (let i = 0; i < n; i++) {
    if (!Number.isFinite(values[i])) throw new NonFiniteTensorError(`non-finite activation ${values[i]} at index ${i}`)
  }
  const data = new Uint8Array(tensorByteLength(shape, dtype))
  const view = new DataView(data.buffer)
  if (dtype === 'f32') {
    if (LITTLE_ENDIAN) data.set(new Uint8Array(values.buffer, values.byteOffset, n * 4))
    else for (let i = 0; i < n; i++) view.setFloat32(i * 4, values[i], true)
  } else if (dtype === 'f16') {
    for (let i = 0; i < n; i++) {
      const h = f32ToF16(values[i])
      if ((h & 0x7c00) === 0x7c00) throw new NonFiniteTensorError(`activation ${values[i]} at index ${i} overflows f16`)
      view.setUint16(i * 2, h, true)
    }
  } else {
    encodeQ8_0(values, shape[shape.length - 1], data, view)
  }
  return { shape: [...shape], dtype, data }
}

/** ggml quantize_row_q8_0_ref, row by row: d = amax/127, id = 1/d, q = roundf(x*id), in f32. */
function encodeQ8_0(values: Float32Array, row: number, data: Uint8Array, view: DataView): void {
  const rows = values.length / row
  const blocks = Math.ceil(row / Q8_0_BLOCK)
  const q = new Int8Array(data.buffer)
  let off = 0
  for (let r = 0; r < rows; r++) {
    for (let b = 0; b < blocks; b++) {
      const from = r * row + b * Q8_0_BLOCK
      const to = r * row + Math.min(row, (b + 1) * Q8_0_BLOCK)
      let amax = 0
      for (let i = from; i < to; i++) amax = Math.max(amax, Math.abs(values[i]))
      const d = Math.fround(amax / 127)
      const id = d !== 0 ? Math.fround(1 / d) : 0
      const h = f32ToF16(d)
      if ((h & 0x7c00) === 0x7c00) throw new NonFiniteTensorError(`q8_0 scale ${d} overflows f16`)
      view.setUint16(off, h, true)
      for (let i = from; i < to; i++) q[off + 2 + i - from] = roundHalfAway(Math.fround(values[i] * id))
      off += Q8_0_BLOCK_BYTES // padding bytes stay zero
    }
  }
}

// ---- decode ----

/** Unpacks a wire tensor to f32, checking its shape and that every value is finite. */
export function decodeTensor(t: Tensor, expect: TensorExpectation = {}): Float32Array {
  const n = validateTensor(t, expect.maxElements)
  if (expect.shape !== undefined) expectShape(t.shape, expect.shape)
  let out: Float32Array
  if (expect.out !== undefined) {
    if (expect.out.length < n) throw new BadShapeError(`output buffer of ${expect.out.length} < ${n} elements`)
    out = expect.out.subarray(0, n)
  } else {
    out = new Float32Array(n)
  }
  const { data } = t
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength)
  if (t.dtype === 'f32') {
    if (LITTLE_ENDIAN) new Uint8Array(out.buffer, out.byteOffset, n * 4).set(data)
    else for (let i = 0; i < n; i++) out[i] = view.getFloat32(i * 4, true)
    for (let i = 0; i < n; i++) {
      if (!Number.isFinite(out[i])) throw new NonFiniteTensorError(`non-finite activation at index ${i}`)
    }
  } else if (t.dtype === 'f16') {
    const table = f16Table()
    for (let i = 0; i < n; i++) {
      const h = view.getUint16(i * 2, true)
      if ((h & 0x7c00) === 0x7c00) throw new NonFiniteTensorError(`non-finite f16 activation at index ${i}`)
      out[i] = table[h]
    }
  } else {
    decodeQ8_0(data, view, t.shape[t.shape.length - 1], out)
  }
  return out
}

function decodeQ8_0(data: Uint8Array, view: DataView, row: number, out: Float32Array): void {
  const table = f16Table()
  const q = new Int8Array(data.buffer, data.byteOffset, data.byteLength)
  const rows = out.length / row
  const blocks = Math.ceil(row / Q8_0_BLOCK)
  let off = 0
  for (let r = 0; r < rows; r++) {
    for (let b = 0; b < blocks; b++) {
      const h = view.getUint16(off, true)
      if ((h & 0x7c00) === 0x7c00) throw new NonFiniteTensorError(`non-finite q8_0 scale in row ${r} block ${b}`)
      const d = table[h]
      const from = r * row + b * Q8_0_BLOCK
      const to = r * row + Math.min(row, (b + 1) * Q8_0_BLOCK)
      for (let i = from; i < to; i++) out[i] = d * q[off + 2 + i - from]
      off += Q8_0_BLOCK_BYTES
    }
  }
}
