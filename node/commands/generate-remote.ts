import type { Forwarding } from '../../client/index.js'
import { createClient, type GenerateResult, parseWirePreference, type WireChoice } from '../../client/index.js'
import type { KvDType } from '../../shards/index.js'
import { progress } from '../log.js'

export interface RemoteGenerateOptions {
  model: string
  tokenizer?: string
  bootstrap: string[]
  prompt: string
  maxTokens: number
  temperature: number
  topK: number
  topP: number
  seed: number
  repetitionPenalty: number
  edgeFirst: number
  edgeLast: number
  forwarding: Forwarding
  /** auto, f32, f16, int8 (or its alias q8_0): see client/wire.ts. */
  wire: WireChoice
  /** Canary checks per real step and hop; 0 turns them off. */
  canaryRate: number
  /** Keep peers' canary records here across runs (client/trust-file.ts). */
  trustFile?: string
  /** Sealed KV deltas every this many positions (0: off), and standby peers fed with them. */
  snapshotEvery?: number
  standby?: boolean
  json: boolean
  kvDType?: KvDType
  log?: (e: Record<string, unknown>) => void
}

/** A progress bar per canary set the client builds (on a terminal only). */
function canaryProgress(): (boundary: number, built: number, total: number) => void {
  const bars = new Map<number, ReturnType<typeof progress>>()
  return (boundary, built, total) => {
    let bar = bars.get(boundary)
    if (!bar) bars.set(boundary, (bar = progress(`canaries at block ${boundary}`, total, { unit: 'canaries' })))
    bar.update(built)
    if (built === total) bar.done()
  }
}

/** `layerswarm generate --bootstrap ...`: the edge here, the remote blocks on the swarm. */
export async function runRemoteGenerate(
  o: RemoteGenerateOptions,
  write: (text: string) => void,
  signal?: AbortSignal
): Promise<GenerateResult & { model: string; seed: number; completion: string; text: string }> {
  const client = await createClient({
    bootstrap: o.bootstrap,
    model: o.model,
    tokenizer: o.tokenizer,
    edgeFirst: o.edgeFirst,
    edgeLast: o.edgeLast,
    forwarding: o.forwarding,
    wireDtype: parseWirePreference(o.wire),
    canaries: o.canaryRate > 0 ? { rate: o.canaryRate, ...(o.trustFile ? { trustFile: o.trustFile } : {}) } : false,
    onCanaryBuild: canaryProgress(),
    snapshotEvery: o.snapshotEvery,
    standby: o.standby,
    kvDType: o.kvDType,
    log: o.log
  })
  try {
    const promptText = client.tokenizer.decode(client.tokenizer.encode(o.prompt))
    if (!o.json) write(promptText)
    const it = client.stream(o.prompt, {
      maxTokens: o.maxTokens,
      temperature: o.temperature,
      topK: o.topK,
      topP: o.topP,
      seed: o.seed,
      repetitionPenalty: o.repetitionPenalty,
      signal
    })
    let r = await it.next()
    while (!r.done) {
      if (!o.json) write(r.value.text)
      r = await it.next()
    }
    const w = r.value.report.wire
    o.log?.({
      event: 'wire',
      requested: w.requested,
      hops: w.hops,
      activationBytes: w.activationBytes,
      positions: w.positions,
      bytesPerToken: w.bytesPerToken
    })
    return { ...r.value, model: o.model, seed: o.seed, completion: r.value.text, text: promptText + r.value.text }
  } finally {
    await client.close()
  }
}

export { WIRE_CHOICES } from '../../client/index.js'
