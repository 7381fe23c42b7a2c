import type { AbortOptions } from '@libp2p/interface'
import {
  benignClassKey,
  type Drift,
  type DriftModel,
  defaultBenignModel,
  densityRatio,
  driftMetrics,
  quantizedWeights
} from '../../canary/index.js'
import { type DType, encodeTensor, type Receipt, sha256, verifyReceipt } from '../../protocol/index.js'
import { computeModelId, createReferenceKernels, createShard, type ModelFile } from '../../shards/index.js'
import { InvalidEvidenceError } from '../errors.js'
import type { ReplayEvidence } from './replay-index.js'
import { verifyReplayEvidence } from './replay-index.js'

/** What verify-evidence found for one canary conviction. */
export interface CanaryEvidenceCheck {
  readonly peerId: string
  readonly sessionId: string
  readonly stepId: number
  /** The peer's Ed25519 signature over (session, step, span, input hash, output hash). */
  readonly signature: boolean
  /** The receipt's span is the evidence's span. */
  readonly span: boolean
  /** SHA-256 of the step's input rows (as sent on the wire) is the receipt's input hash. */
  readonly inputHash: boolean | 'no tensors'
  /** SHA-256 of the peer's answer (as sent on the wire) is the receipt's output hash. */
  readonly outputHash: boolean | 'no tensors'
  /** With the model: the span recomputed here, the answer's drift from it and its benign density ratio (> 1: tampering more likely). */
  readonly recomputed?: { modelId: boolean; drift: Drift; densityRatio: number; tampered: boolean }
}

export interface EvidenceReport {
  readonly canaries: CanaryEvidenceCheck[]
  readonly replays: Array<{ peerId: string; valid: boolean }>
  /** Every signature and hash holds, and (with the model) every recomputed drift is beyond benign. */
  readonly ok: boolean
}

const hexBytes = (v: unknown, what: string): Uint8Array => {
  if (typeof v !== 'string' || !/^([0-9a-f]{2})*$/i.test(v)) throw new InvalidEvidenceError(`${what} must be a hex string`)
  return new Uint8Array(Buffer.from(v, 'hex'))
}
const hexF32 = (v: unknown, what: string): Float32Array => {
  const b = hexBytes(v, what)
  if (b.length % 4 !== 0) throw new InvalidEvidenceError(`${what}: ${b.length} bytes are not f32 values`)
  const out = new Float32Array(b.length / 4)
  const dv = new DataView(b.buffer, b.byteOffset, b.byteLength)
  for (let i = 0; i < out.length; i++) out[i] = dv.getFloat32(i * 4, true)
  return out
}

function receiptOf(r: unknown, what: string): Receipt {
  const o = r as Record<string, unknown>
  if (!o || typeof o.peerId !== 'string' || !Number.isInteger(o.start) || !Number.isInteger(o.end))
    throw new InvalidEvidenceError(`${what}: a receipt needs peerId, start and end`)
  return {
    peerId: o.peerId,
    start: o.start as number,
    end: o.end as number,
    inputHash: hexBytes(o.inputHash, `${what}.inputHash`),
    outputHash: hexBytes(o.outputHash, `${what}.outputHash`),
    signature: hexBytes(o.signature, `${what}.signature`)
  }
}

const equal = (a: Uint8Array, b: Uint8Array): boolean => a.length === b.length && a.every((x, i) => x === b[i])

/** The verification report inside a file: a CLI --json result, a gateway `layerswarm` field, or the report itself. */
function findReport(json: unknown): { evidence: unknown[]; replays: unknown[] } {
  const o = json as Record<string, unknown>
  const candidates = [o, o?.report, (o?.layerswarm as Record<string, unknown>)?.report] as Array<
    Record<string, unknown> | undefined
  >
  const r = candidates.find((c) => c && Array.isArray(c.evidence))
  if (!r) throw new InvalidEvidenceError('no `evidence` array found (a generate --json result or a gateway response)')
  return { evidence: r.evidence as unknown[], replays: Array.isArray(r.replays) ? (r.replays as unknown[]) : [] }
}

/**
 * Checks a report's evidence as a third party can: each conviction's receipt signature (under
 * the peer id's own key), span and hash chain (the tensors hash to what the peer signed), and,
 * given the model file, recomputes the span over the canary's input rows with reference kernels
 * and scores the peer's answer against it with the benign drift model.
 */
export async function verifyEvidence(
  json: unknown,
  model?: ModelFile,
  benign: DriftModel = defaultBenignModel(),
  { signal }: AbortOptions = {}
): Promise<EvidenceReport> {
  const { evidence, replays } = findReport(json)
  const canaries: CanaryEvidenceCheck[] = []
  for (const [i, raw] of evidence.entries()) {
    // each entry may recompute a span with reference kernels: the place to stop
    signal?.throwIfAborted()
    const e = raw as Record<string, unknown>
    const what = `evidence[${i}]`
    if (
      typeof e.peerId !== 'string' ||
      typeof e.sessionId !== 'string' ||
      !Number.isInteger(e.stepId) ||
      !Number.isInteger(e.position)
    )
      throw new InvalidEvidenceError(`${what}: needs peerId, sessionId, stepId and position`)
    const span = e.span as [number, number]
    const receipt = receiptOf(e.receipt, `${what}.receipt`)
    const position = e.position as number
    const signature =
      receipt.peerId === e.peerId &&
      typeof e.modelId === 'string' &&
      (await verifyReceipt(receipt, { sessionId: e.sessionId, stepId: e.stepId as number, position, modelId: e.modelId }))
    const wire = (typeof e.wire === 'string' ? e.wire : 'f32') as DType
    // the KV dtype the peer announced: its benign class (a q8_0 cache drifts more); absent in older evidence
    const kvDtype = e.kvDtype === 'f16' || e.kvDtype === 'q8_0' ? e.kvDtype : undefined
    let inputHash: CanaryEvidenceCheck['inputHash'] = 'no tensors'
    let outputHash: CanaryEvidenceCheck['outputHash'] = 'no tensors'
    let recomputed: CanaryEvidenceCheck['recomputed']
    if (e.input !== undefined && e.output !== undefined) {
      const input = hexF32(e.input, `${what}.input`)
      const output = hexF32(e.output, `${what}.output`)
      const stepRows = e.rows as number
      if (
        !Number.isInteger(stepRows) ||
        stepRows < 1 ||
        output.length % stepRows !== 0 ||
        input.length !== (output.length / stepRows) * (position + stepRows)
      )
        throw new InvalidEvidenceError(`${what}: input, output, position and rows do not fit together`)
      const d = output.length / stepRows
      const sent = encodeTensor(input.subarray(position * d), [stepRows, d], wire).data
      inputHash = equal(sha256(sent), receipt.inputHash)
      outputHash = equal(sha256(encodeTensor(output, [stepRows, d], wire).data), receipt.outputHash)
      if (model) {
        const shard = createShard({ model, start: span[0], end: span[1], kernels: createReferenceKernels() })
        shard.openSession('evidence', { maxLength: position + stepRows })
        const all = shard.forward('evidence', input, 0)
        shard.closeSession('evidence')
        const reference = all.subarray(position * d)
        const drift = driftMetrics(output, reference)
        // the peer's benign class: its wire, its KV dtype, whether its kernels quantise activations (canary/calibrate.ts)
        const key = benignClassKey(wire, kvDtype, quantizedWeights(model))
        const ratio = densityRatio(benign, drift, key, position + stepRows)
        recomputed = { modelId: computeModelId(model) === e.modelId, drift, densityRatio: ratio, tampered: ratio > 1 }
      }
    }
    canaries.push({
      peerId: e.peerId,
      sessionId: e.sessionId,
      stepId: e.stepId as number,
      signature,
      span: receipt.start === span?.[0] && receipt.end === span?.[1],
      inputHash,
      outputHash,
      ...(recomputed ? { recomputed } : {})
    })
  }
  const replayChecks: EvidenceReport['replays'] = []
  for (const [i, raw] of replays.entries()) {
    const r = raw as Record<string, Record<string, unknown>> & { peerId: string }
    const step = (s: Record<string, unknown>, w: string) => ({
      sessionId: String(s?.sessionId),
      stepId: Number(s?.stepId),
      position: Number(s?.position),
      modelId: String(s?.modelId),
      receipt: receiptOf(s?.receipt, w)
    })
    const ev = {
      ...r,
      original: step(r.original, `replays[${i}].original`),
      replayed: step(r.replayed, `replays[${i}].replayed`)
    }
    replayChecks.push({ peerId: r.peerId, valid: await verifyReplayEvidence(ev as unknown as ReplayEvidence) })
  }
  const ok =
    canaries.every(
      (c) =>
        c.signature &&
        c.span &&
        c.inputHash !== false &&
        c.outputHash !== false &&
        (!c.recomputed || (c.recomputed.modelId && c.recomputed.tampered))
    ) && replayChecks.every((r) => r.valid)
  return { canaries, replays: replayChecks, ok }
}
