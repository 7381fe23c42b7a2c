import { readFileSync } from 'node:fs'
import type { Forwarding } from '../../client/index.js'
import { createClient, type GenerateResult, parseWirePreference, type WireChoice } from '../../client/index.js'
import { progress } from '../log.js'
import { type StreamWhen, StreamWriter } from './stream-writer.js'

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
    const promptText = client.tokenizer.decode(client.tokenizer.encode(o.prompt))
    const out = StreamWriter.create(o.json ? () => {} : write, o.stream ?? 'auto', promptText, process.stdout.isTTY === true)
    const it = client.stream(o.prompt, {
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

export { WIRE_CHOICES } from '../../client/index.js'
