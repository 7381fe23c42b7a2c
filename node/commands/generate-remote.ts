import type { Forwarding } from '../../client/index.js'
import { createClient, type GenerateResult, parseWirePreference, type WireChoice } from '../../client/index.js'
import { type GgufValue, type KvDType, openModelFile } from '../../shards/index.js'
import { progress } from '../log.js'
import { chatPrompt } from './chat-prompt.js'

/** The model file's metadata (the chat template), read from its header. */
function templateMetadata(o: RemoteGenerateOptions): ReadonlyMap<string, GgufValue> {
  const file = openModelFile(o.model, o.tokenizer !== undefined ? { tokenizerPath: o.tokenizer } : {})
  try {
    return file.metadata
  } finally {
    file.close()
  }
}

export interface RemoteGenerateOptions {
  /** Wrap the prompt in the model's chat template (one user turn). */
  chat?: boolean
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
  /** auto, f32, f16, q8_0 (or its deprecated name int8): see client/wire-negotiation.ts. */
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
    const { prompt, special } = o.chat
      ? chatPrompt(templateMetadata(o), client.tokenizer, o.prompt)
      : { prompt: o.prompt, special: false }
    const promptText = client.tokenizer.decode(client.tokenizer.encode(prompt, { special }))
    if (!o.json) write(promptText)
    const it = client.stream(prompt, {
      special,
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

export { WIRE_CLI_CHOICES } from '../../client/index.js'
