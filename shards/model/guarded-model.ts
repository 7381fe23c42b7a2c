import type { TensorName } from '../types.js'
import type { ModelFile } from './model-file.js'

/** Which reads besides the weights' bytes a guard also covers. */
export interface GuardedReads {
  /** a tensor's type and shape (from the header): guard only where the header itself is partial */
  readonly matrixInfo?: boolean
  /** the byte samples the sampled model id reads (shards/model/model-id.ts) */
  readonly sampleTensor?: boolean
  /** the check of a read of some rows (readMatrixRows), where a holder holds part of a tensor; `check(name)` by default */
  readonly rows?: (name: TensorName, first: number, count: number) => void
}

/**
 * `model` with every read of a tensor's bytes preceded by `check(name)`, which throws the caller's
 * typed error for a tensor this holder lacks. One wrapper for the holders that hold part of a file:
 * a thin client's edge (client/verification/canaries/canary-bank-init.ts) and a store of fetched pieces
 * (formats/weights-pieces.ts), so a missing tensor is a coded error instead of zeros or a trace.
 */
export function guardedModel(model: ModelFile, check: (name: TensorName) => void, also: GuardedReads = {}): ModelFile {
  const guard = <T>(name: TensorName, read: () => T): T => {
    check(name)
    return read()
  }
  const { matrixInfo, readMatrixInto, readMatrixRows } = model
  return {
    format: model.format,
    path: model.path,
    config: model.config,
    vocabulary: model.vocabulary,
    metadata: model.metadata,
    weightDType: model.weightDType,
    hasTensor: (name) => model.hasTensor(name),
    readMatrix: (name) => guard(name, () => model.readMatrix(name)),
    ...(matrixInfo
      ? {
          matrixInfo: (name: TensorName) =>
            also.matrixInfo ? guard(name, () => matrixInfo.call(model, name)) : matrixInfo.call(model, name)
        }
      : {}),
    ...(readMatrixInto
      ? { readMatrixInto: (name: TensorName, into: Uint8Array) => guard(name, () => readMatrixInto.call(model, name, into)) }
      : {}),
    ...(readMatrixRows
      ? {
          readMatrixRows: (name: TensorName, first: number, count: number) => {
            if (also.rows) also.rows(name, first, count)
            else check(name)
            return readMatrixRows.call(model, name, first, count)
          }
        }
      : {}),
    readVector: (name) => guard(name, () => model.readVector(name)),
    sampleTensor: (name, maxBytes) =>
      also.sampleTensor ? guard(name, () => model.sampleTensor(name, maxBytes)) : model.sampleTensor(name, maxBytes),
    bytesRead: () => model.bytesRead(),
    close: () => model.close()
  }
}
