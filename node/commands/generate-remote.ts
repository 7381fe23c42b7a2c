import { readFileSync } from 'node:fs'
import type { Forwarding } from '../../client/index.js'
import { createClient, type GenerateResult, parseWirePreference, type WireChoice } from '../../client/index.js'
import { type GgufValue, openModelFile } from '../../shards/index.js'
import { progress } from '../log.js'
import { chatPrompt } from './chat-prompt.js'
import { type StreamWhen, StreamWriter } from './stream-writer.js'

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
  /** Stream tokens as they come (default auto: when stdout is a terminal); otherwise print the final, honest text. */
  stream?: StreamWhen
  /** Hold each token until the peers that computed it have passed their canary threshold. */
  verifiedStream?: boolean
  /** The canary secret's file, and a corpus the canary prompts are cut from (docs/verification.md). */
  canarySecret?: string
  canaryCorpus?: string
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
    canaries:
      o.canaryRate > 0
        ? {
            rate: o.canaryRate,
            ...(o.trustFile ? { trustFile: o.trustFile } : {}),
            ...(o.canarySecret ? { secretFile: o.canarySecret } : {}),
            ...(o.canaryCorpus ? { corpus: readFileSync(o.canaryCorpus, 'utf8').split(/\n\s*\n/) } : {})
          }
        : false,
    onCanaryBuild: canaryProgress(),
    snapshotEvery: o.snapshotEvery,
    standby: o.standby,
    log: o.log
  })
  try {
    const { prompt, special } = o.chat
      ? chatPrompt(templateMetadata(o), client.tokenizer, o.prompt)
      : { prompt: o.prompt, special: false }
    const promptText = client.tokenizer.decode(client.tokenizer.encode(prompt, { special }))
    const out = StreamWriter.create(o.json ? () => {} : write, o.stream ?? 'auto', promptText, process.stdout.isTTY === true)
    const it = client.stream(prompt, {
      special,
      maxTokens: o.maxTokens,
      temperature: o.temperature,
      topK: o.topK,
      topP: o.topP,
      seed: o.seed,
      repetitionPenalty: o.repetitionPenalty,
      verifiedStream: o.verifiedStream,
      signal
    })
    let r = await it.next()
    while (!r.done) {
      out.event(r.value)
      r = await it.next()
    }
    out.end(r.value.text)
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
