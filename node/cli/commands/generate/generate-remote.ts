import { readFileSync } from 'node:fs'
import type { AbortOptions } from '@libp2p/interface'
import type { ClientInit, Forwarding, LayerswarmClient, RouteWaitProgress, SpeculateMode } from '../../../../client/index.js'
import {
  createClient,
  DEFAULT_ROUTE_TIMEOUT_MS,
  type GenerateResult,
  NoRouteError,
  parseWirePreference,
  type WireChoice
} from '../../../../client/index.js'
import { reachabilityOf } from '../../../../protocol/index.js'
import { type GgufValue, isContentModelId, type KvDType, openModelFile } from '../../../../shards/index.js'
import { loadOrCreateIdentity } from '../../../identity.js'
import { progress } from '../../../log.js'
import { chatPrompt } from '../../chat-prompt.js'
import { type StreamWhen, StreamWriter } from '../../stream-writer.js'
import { canaryBankInit } from '../../verification-options.js'
import { checkContextLength } from '../checks.js'

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
  /** Issue 33: fetch the edge from the swarm by content id instead of opening `model`. */
  modelId?: string
  modelsDir?: string
  /** Issue 33: serve what was fetched to other peers (ClientInit.seedWeights). */
  seedWeights?: ClientInit['seedWeights']
  /** The client's key file (node/identity.ts); default: a fresh key per run. */
  identity?: string
  /** Client listen addresses (lets a node behind NAT dial back after a relayed start: DCUtR). */
  listen?: string[]
  announce?: string[]
  prompt: string
  maxTokens: number
  temperature: number
  topK: number
  topP: number
  seed: number
  repetitionPenalty: number
  /** --json-schema: the output is JSON matching it (constrained sampling). */
  schema?: object
  edgeFirst: number
  edgeLast: number
  head?: 'local' | 'remote'
  forwarding: Forwarding
  /** auto, f32, f16, q8_0 (or its deprecated name int8): see client/session/wire-negotiation.ts. */
  wire: WireChoice
  /** Canary checks per real step and hop; 0 turns them off. */
  canaryRate: number
  /** Keep peers' canary records here across runs (client/verification/trust-file.ts). */
  trustFile?: string
  /** Sealed KV deltas every this many positions (0: off), and standby peers fed with them. */
  snapshotEvery?: number
  standby?: boolean
  /** Issue #41: standbys fed node to node ('node') or through the client ('client'). */
  kvPath?: 'node' | 'client'
  /** Speculative steps (client/speculation/speculation.ts). */
  speculate?: SpeculateMode
  json: boolean
  /** On a failed route, explain it on stderr (peers dialled, which answered, blocks missing). */
  verbose?: boolean
  /** Stream tokens as they come (default auto: when stdout is a terminal); otherwise print the final, honest text. */
  stream?: StreamWhen
  /** Hold each token until the peers that computed it have passed their canary threshold. */
  verifiedStream?: boolean
  /** The canary secret's file, and a corpus the canary prompts are cut from (docs/verification.md). */
  canarySecret?: string
  canaryCorpus?: string
  /** A sealed canary bank and its key file (a thin client: node/cli/commands/canary.ts). */
  canaryBank?: string
  canaryBankKey?: string
  kvDType?: KvDType
  log?: (e: Record<string, unknown>) => void
}

/** Waiting longer than this for a route prints "finding peers…" lines (a quick find prints nothing). */
const QUIET_WAIT_MS = 1_000

/**
 * "finding peers… (N of M blocks covered; waiting up to T s)" on stderr while the route is not
 * there yet: nodes started a moment ago may not have announced yet, so the client waits for
 * coverage up to the route deadline, and says so, before it fails with NO_ROUTE (issue #31).
 */
function findingPeers(client: LayerswarmClient, timeoutMs: number): (p: RouteWaitProgress) => void {
  let last = ''
  const [from, to] = client.span.remote
  return (p) => {
    if (p.elapsedMs < QUIET_WAIT_MS) return
    const line = `finding peers… (${p.covered} of ${p.total} blocks covered: the swarm's part, blocks ${from}..${to - 1}; ${p.peers} peer(s) answered; waiting up to ${Math.round(timeoutMs / 1000)} s, then NO_ROUTE)`
    if (line === last) return
    last = line
    process.stderr.write(`${line}\n`)
  }
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
  { signal }: AbortOptions = {}
): Promise<
  GenerateResult & {
    model: string
    seed: number
    reachability: Record<string, string>
    completion: string
    text: string
    stats: { loadMs: number; prefillMs: number; decodeMs: number; decodeTokensPerSecond: number }
  }
> {
  const t0 = performance.now()
  const identity = o.identity !== undefined ? await loadOrCreateIdentity(o.identity) : undefined
  // issue 33: a canary's reference is the client's own run of the hop's blocks (docs/weights.md)
  if (o.modelId !== undefined && isContentModelId(o.modelId) && o.canaryRate > 0 && o.canaryBank === undefined)
    process.stderr.write(
      'canaries without --canary-bank need the middle blocks too: fetching the whole model (a bank, or --canary-rate 0, keeps the client thin: docs/weights.md)\n'
    )
  const client = await createClient({
    bootstrap: o.bootstrap,
    ...(identity ? { privateKey: identity.privateKey } : {}),
    ...(o.listen?.length ? { listen: o.listen } : {}),
    ...(o.announce?.length ? { announce: o.announce } : {}),
    ...(o.modelId !== undefined
      ? { modelId: o.modelId, modelsDir: o.modelsDir, seedWeights: o.seedWeights }
      : { model: o.model }),
    tokenizer: o.tokenizer,
    edgeFirst: o.edgeFirst,
    edgeLast: o.edgeLast,
    head: o.head,
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
    canaryBank: canaryBankInit(o),
    onCanaryBuild: canaryProgress(),
    snapshotEvery: o.snapshotEvery,
    standby: o.standby,
    kvPath: o.kvPath,
    speculate: o.speculate,
    kvDType: o.kvDType,
    log: o.log
  })
  try {
    const { prompt, special, template } = o.chat
      ? chatPrompt(
          templateMetadata(client.fetchedWeights ? { ...o, model: client.fetchedWeights.path } : o),
          client.tokenizer,
          o.prompt
        )
      : { prompt: o.prompt, special: false, template: undefined }
    const promptTokens = client.tokenizer.encode(prompt, { special })
    checkContextLength(promptTokens.length, client.contextLength)
    const promptText = client.tokenizer.decode(promptTokens)
    client.view.onWait = findingPeers(client, DEFAULT_ROUTE_TIMEOUT_MS)
    const loadMs = performance.now() - t0
    const tStart = performance.now()
    let tFirst = 0
    let count = 0
    // The writer echoes the prompt once the first token is back (a route exists), so an error is
    // never glued to it and nothing is printed that the swarm then cannot continue.
    const out = StreamWriter.create(o.json ? () => {} : write, o.stream ?? 'auto', promptText, process.stdout.isTTY === true)
    const it = client.stream(prompt, {
      special,
      ...(template ? { promptTemplate: template } : {}),
      maxTokens: o.maxTokens,
      temperature: o.temperature,
      topK: o.topK,
      topP: o.topP,
      seed: o.seed,
      repetitionPenalty: o.repetitionPenalty,
      ...(o.schema ? { schema: o.schema } : {}),
      verifiedStream: o.verifiedStream,
      signal
    })
    let r = await next(it, client, o)
    while (!r.done) {
      if (r.value.type === 'token' && count++ === 0) tFirst = performance.now()
      out.event(r.value)
      r = await next(it, client, o)
    }
    out.end(r.value.text)
    const tEnd = performance.now()
    const w = r.value.report.wire
    o.log?.({
      event: 'wire',
      requested: w.requested,
      hops: w.hops,
      activationBytes: w.activationBytes,
      positions: w.positions,
      bytesPerToken: w.bytesPerToken
    })
    const decodeMs = count > 1 ? tEnd - tFirst : 0
    // how the client reaches each peer it routed through, at the end: direct, relayed or hole-punched
    const routed = new Set(r.value.report.routes.flat().map((h) => h.peerId))
    const reachability = Object.fromEntries([...routed].map((id) => [id, reachabilityOf(client.host, id) ?? 'closed']))
    return {
      ...r.value,
      reachability,
      model: client.fetchedWeights?.path ?? o.model,
      ...(client.fetchedWeights ? { weights: { ...client.fetchedWeights, seeded: client.seeder?.stats() ?? null } } : {}),
      seed: o.seed,
      completion: r.value.text,
      text: promptText + r.value.text,
      stats: {
        loadMs: round(loadMs),
        prefillMs: round((tFirst || tEnd) - tStart),
        decodeMs: round(decodeMs),
        decodeTokensPerSecond: decodeMs > 0 ? round(((count - 1) * 1000) / decodeMs) : 0
      }
    }
  } finally {
    await client.close()
  }
}

/** The next token; with --verbose a missing route is explained, one line per fact, before it is thrown. */
async function next<T, R>(
  it: AsyncGenerator<T, R>,
  client: LayerswarmClient,
  o: RemoteGenerateOptions
): Promise<IteratorResult<T, R>> {
  try {
    return await it.next()
  } catch (err) {
    if (o.verbose && err instanceof NoRouteError) {
      const [from, to] = client.span.remote
      for (const line of client.view.explain(from, to)) process.stderr.write(`route: ${line}\n`)
    }
    throw err
  }
}

function round(x: number): number {
  return Math.round(x * 100) / 100
}

export { WIRE_CLI_CHOICES } from '../../../../client/index.js'
