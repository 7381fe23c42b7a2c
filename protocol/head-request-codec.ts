/**
 * The head fields of a step and its result (issue #35, field numbers 240-259): a HeadRequest asks
 * the hop that runs the model's last block for the top-k logits of its output, sealed (StepResult
 * sealed_head). Decoded with the same context-free checks as every other field; whether this hop
 * can serve the head is the handler's question.
 */
import { MalformedMessageError } from './errors.js'
import { bytesField, dtypeFromName, finiteField, uint32Field } from './field-checks.js'
import type { wire } from './schema.js'
import type { DType, HeadRequest } from './types.js'

/** Sealed head replies are small; a full row of a 262k vocabulary in f32 with ids stays under this. */
export const MAX_SEALED_HEAD_BYTES = 8 * 1024 * 1024

/** Largest k a request may ask (the largest vocabulary the engine accepts is far below). */
export const MAX_HEAD_K = 1 << 20

export function headFromWire(w: wire.HeadRequest.$Properties | null | undefined): { head?: HeadRequest } {
  if (w == null) return {}
  const minK = uint32Field(w.minK ?? 0, 'step.head.min_k', 1, MAX_HEAD_K)
  const maxK = uint32Field(w.maxK ?? 0, 'step.head.max_k', minK, MAX_HEAD_K)
  const mass = finiteField(w.mass ?? 0, 'step.head.mass')
  if (mass > 1) throw new MalformedMessageError(`step.head.mass: ${mass} is above 1`)
  const temperature = finiteField(w.temperature ?? 0, 'step.head.temperature')
  let checkDtype: DType | undefined
  if (w.checkDtype) {
    checkDtype = dtypeFromName(w.checkDtype)
    if (!checkDtype) throw new MalformedMessageError(`step.head.check_dtype: unknown dtype ${JSON.stringify(w.checkDtype)}`)
  }
  const head: HeadRequest = { minK, maxK, mass, temperature, allRows: w.allRows === true, valuesF32: w.valuesF32 === true }
  if (w.logSumExp === true) head.logSumExp = true
  return { head: checkDtype ? { ...head, checkDtype } : head }
}

export function sealedHeadFromWire(value: unknown): { sealedHead?: Uint8Array } {
  if (value == null || (value instanceof Uint8Array && value.length === 0)) return {}
  const b = bytesField(value, 'result.sealed_head')
  if (b.length > MAX_SEALED_HEAD_BYTES) throw new MalformedMessageError(`result.sealed_head: ${b.length} bytes`)
  return { sealedHead: b }
}
