import { dirname, join } from 'node:path'
import { type CanaryTraces, loadBankKey, loadCanaryBank } from '../../../canary/index.js'
import { guardedModel, type ModelFile, type TensorName } from '../../../shards/index.js'
import { BlockNotHeldError } from '../../errors.js'

/**
 * Where a client's canary bank comes from (`layerswarm canary build`, docs/verification.md): the
 * sealed file and its key (the key's bytes, or the file holding them in hex; by default
 * `canary-bank-key` beside the bank), or traces already opened.
 */
export type CanaryBankInit =
  | { readonly path: string; readonly key?: Uint8Array; readonly keyFile?: string }
  | { readonly traces: CanaryTraces }

/** The key file a bank is opened with when none is named: `canary-bank-key` beside it. */
export function defaultBankKeyFile(bankPath: string): string {
  return join(dirname(bankPath), 'canary-bank-key')
}

/** Open the bank a client was given, for the model it serves (typed canary/ errors otherwise). */
export function openCanaryBank(init: CanaryBankInit, modelId: string): CanaryTraces {
  if ('traces' in init) return init.traces
  const key = init.key ?? loadBankKey(init.keyFile ?? defaultBankKeyFile(init.path))
  return loadCanaryBank(init.path, key, { modelId })
}

/**
 * The model as a thin client holds it: the embeddings, head and its edge blocks [0, first) and
 * [last, n); reading any weight of a block in [first, last) throws BlockNotHeldError. The model id
 * (a hash of samples of every tensor, computeModelId) stays readable: a client whose file lacks the
 * middle blocks would get it from the bank. With a canary bank the client never needs the rest.
 */
export function edgeOnlyModel(model: ModelFile, first: number, last: number): ModelFile {
  /** Throws for a tensor in a block this client does not hold. */
  const check = (name: TensorName): void => {
    const m = /^blk\.(\d+)\./.exec(name)
    if (m && Number(m[1]) >= first && Number(m[1]) < last) {
      throw new BlockNotHeldError(`block ${m[1]} (${name}) is not held by this client (it holds [0, ${first}) and [${last}, n))`)
    }
  }
  return guardedModel(model, check, { matrixInfo: true })
}
