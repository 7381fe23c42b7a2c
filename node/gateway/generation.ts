import { DEFAULT_SPECULATE, type GenerateResult, type LayerswarmClient, type SpeculateMode } from '../../client/index.js'
import type { GrammarNode, TokenLogprobs } from '../../shards/index.js'
import type { Metrics } from '../daemon/index.js'
import type { Logger } from '../log.js'
import { ApiError, invalidRequest } from './errors.js'
import type { LiveStats } from './live-stats.js'
import type { GenerationParams } from './request-params.js'
import { StopMatcher } from './stop-sequences.js'

/** What the routes need of the gateway to run a generation. */
export interface GatewayContext {
  readonly client: LayerswarmClient
  readonly stats: LiveStats
  readonly metrics?: Metrics
  readonly log: Logger
  /** Generations at once; more get 429 `busy` rather than a queue that hides the load. */
  readonly maxConcurrent: number
  /** The model's context length (prompt + completion tokens). */
  readonly contextLength: number
  /** The gateway's speculation (--speculate): requests without layerswarm.speculate get it. */
  readonly speculate?: SpeculateMode
}

/** A request's layerswarm.speculate as the SDK's option (`draft`: the gateway's draft model). */
export function requestSpeculate(ctx: GatewayContext, params: GenerationParams): SpeculateMode | undefined {
  const asked = params.speculate
  if (asked !== 'draft') return asked
  if (ctx.speculate?.startsWith('draft:')) return ctx.speculate
  throw invalidRequest(
    "Invalid 'layerswarm.speculate': this gateway has no draft model (start it with --speculate draft:FILE).",
    'layerswarm.speculate',
    'unsupported_value'
  )
}

export interface GenerationRequest {
  readonly endpoint: 'completions' | 'chat'
  readonly prompt: string
  readonly params: GenerationParams
  /** Stop sequences of the chat format, on top of the request's. */
  readonly formatStops?: readonly string[]
  /** The prompt is a chat template's output: parse the special tokens it writes. */
  readonly special?: boolean
  /** How the prompt was made from a user message (the chat format), for secret canaries. */
  readonly promptTemplate?: (userText: string) => string
  /** Constrained sampling: the completion follows this grammar (response_format, tool calls). */
  readonly grammar?: GrammarNode
  /** Log-probabilities of each token with this many alternatives (undefined: none). */
  readonly topLogprobs?: number
  readonly signal: AbortSignal
}

export interface GenerationOutcome {
  readonly text: string
  readonly promptTokens: number
  readonly completionTokens: number
  readonly finishReason: 'stop' | 'length'
  readonly result: GenerateResult
  readonly ms: number
  /** The drafter this request ran with: off, ngram, self or draft (the gateway's draft model). */
  readonly speculate: string
  /** Per completion token, when the request asked for logprobs. */
  readonly logprobs?: TokenLogprobs[]
}

/** Text safe to show, with the log-probabilities of the tokens sampled since the last call (when asked). */
export type OnText = (text: string, logprobs?: TokenLogprobs[]) => void

/**
 * Text already streamed was void (a peer that computed it was convicted): the completion from
 * character `offset` on is `text` now (the SDK recomputed it through honest peers).
 */
export type OnRollback = (offset: number, text: string, convicted: string[]) => void

/**
 * Run one generation through the swarm. `onText` gets the completion text as it becomes safe to
 * show (stop sequences cut, never shown in part); `onRollback` replaces text already given once a
 * peer that computed it is convicted. The outcome's text is honest either way: the SDK recomputes
 * every token a convicted peer took part in before it finishes (client/session/verified-stream.ts).
 */
export async function runGeneration(
  ctx: GatewayContext,
  req: GenerationRequest,
  onText?: OnText,
  onRollback?: OnRollback
): Promise<GenerationOutcome> {
  // busy first: tokenizing a prompt of up to the body limit costs more than refusing it (issue #17)
  if (ctx.stats.active >= ctx.maxConcurrent) {
    throw new ApiError(
      429,
      `The gateway is busy: ${ctx.stats.active} generations running (--max-concurrent ${ctx.maxConcurrent}). Retry shortly.`,
      'rate_limit_error',
      'busy'
    )
  }
  const promptLength = ctx.client.tokenizer.encode(req.prompt, { special: req.special ?? false }).length
  if (promptLength >= ctx.contextLength) {
    throw invalidRequest(
      `This model's maximum context length is ${ctx.contextLength} tokens; your prompt has ${promptLength}.`,
      req.endpoint === 'chat' ? 'messages' : 'prompt',
      'context_length_exceeded'
    )
  }
  // OpenAI's defaults: 16 tokens for completions, up to the context for chat.
  const requested = req.params.maxTokens ?? (req.endpoint === 'completions' ? 16 : ctx.contextLength)
  const maxTokens = Math.min(requested, ctx.contextLength - promptLength)
  const speculate = requestSpeculate(ctx, req.params)
  ctx.stats.sessionStarted()
  ctx.metrics?.sessionOpened()
  const t0 = performance.now()
  try {
    const out = await attempt(ctx, req, { maxTokens, promptLength }, speculate, onText, onRollback)
    const mode = speculate ?? ctx.speculate ?? DEFAULT_SPECULATE
    const outcome = { ...out, ms: performance.now() - t0, speculate: mode.startsWith('draft:') ? 'draft' : mode }
    if (out.result.report.rollbacks.length > 0)
      ctx.log.warn(
        { convicted: out.result.convicted, rollbacks: out.result.report.rollbacks },
        'tokens recomputed after convictions'
      )
    finish(ctx, req, outcome)
    return outcome
  } catch (err) {
    ctx.stats.errorsTotal++
    ctx.metrics?.error(typeof (err as { code?: unknown }).code === 'string' ? (err as { code: string }).code : 'INTERNAL')
    throw err
  } finally {
    ctx.stats.sessionEnded()
    ctx.metrics?.sessionClosed()
  }
}

async function attempt(
  ctx: GatewayContext,
  req: GenerationRequest,
  { maxTokens, promptLength }: { maxTokens: number; promptLength: number },
  speculate: SpeculateMode | undefined,
  onText?: OnText,
  onRollback?: OnRollback
): Promise<Omit<GenerationOutcome, 'ms' | 'speculate'>> {
  const { params } = req
  // log-probabilities by position (a recomputed token overwrites its own), and those not yet sent
  const byPosition = new Map<number, TokenLogprobs>()
  let pending: TokenLogprobs[] = []
  let tokensSeen = 0
  const wantLogprobs = req.topLogprobs !== undefined
  const stops = [...params.stop, ...(req.formatStops ?? [])]
  let matcher = new StopMatcher(stops)
  const eos = ctx.client.tokenizer.stopIds[0] ?? ctx.client.tokenizer.eosId
  // `raw`: the completion as the SDK streamed it; `text`: what went out, stop sequences cut
  let raw = ''
  let text = ''
  const it = ctx.client.stream(req.prompt, {
    maxTokens,
    temperature: params.temperature,
    topP: params.topP === 0 ? 1e-9 : params.topP,
    seed: params.seed ?? Math.floor(Math.random() * 2 ** 31),
    signal: req.signal,
    special: req.special ?? false,
    ...(req.promptTemplate ? { promptTemplate: req.promptTemplate } : {}),
    speculate,
    ...(req.grammar ? { grammar: req.grammar } : {}),
    ...(wantLogprobs
      ? {
          topLogprobs: req.topLogprobs,
          onSampled: (_t: number, position: number, lp?: TokenLogprobs) => lp && byPosition.set(position, lp)
        }
      : {}),
    // A stop sequence ends the text, but the SDK's stream has no "stop now" that still hands back
    // the verification report: make the next token EOS so the generation ends the normal way.
    onLogits: (logits) => {
      if (!matcher.stopped) return
      logits.fill(Number.NEGATIVE_INFINITY)
      logits[eos] = 0
    }
  })
  let last = performance.now()
  let r = await it.next()
  while (!r.done) {
    const ev = r.value
    if (ev.type === 'rollback') {
      // what goes out is the honest completion through a fresh stop matcher
      raw = raw.slice(0, ev.textOffset) + ev.text
      tokensSeen = ev.position + ev.tokens.length
      pending = []
      matcher = new StopMatcher(stops)
      const now = matcher.push(raw)
      let same = 0
      while (same < Math.min(now.length, text.length) && now[same] === text[same]) same++
      if (same < text.length) onRollback?.(same, now.slice(same), ev.convicted)
      else if (now.length > text.length) onText?.(now.slice(text.length))
      text = now
    } else {
      const now = performance.now()
      ctx.metrics?.recordStep('decode', 1, (now - last) / 1000)
      last = now
      ctx.stats.token()
      raw += ev.text
      const lp = wantLogprobs ? byPosition.get(promptLength - 1 + tokensSeen) : undefined
      if (lp) pending.push(lp)
      tokensSeen++
      const piece = matcher.push(ev.text)
      if (piece) {
        text += piece
        onText?.(piece, wantLogprobs ? pending.splice(0) : undefined)
      }
    }
    r = await it.next()
  }
  const rest = matcher.flush()
  if (rest || pending.length > 0) {
    text += rest
    onText?.(rest, wantLogprobs ? pending.splice(0) : undefined)
  }
  const result = r.value
  const finishReason = !matcher.stopped && result.tokens.length >= maxTokens ? 'length' : 'stop'
  const logprobs = wantLogprobs
    ? result.tokens.map((_, i) => byPosition.get(promptLength - 1 + i)).filter((x): x is TokenLogprobs => x !== undefined)
    : undefined
  return {
    text,
    promptTokens: result.promptTokens.length,
    completionTokens: result.tokens.length,
    finishReason,
    result,
    ...(logprobs ? { logprobs } : {})
  }
}

function finish(ctx: GatewayContext, req: GenerationRequest, o: GenerationOutcome): void {
  const { report } = o.result
  // Canary checks since the last report, per peer (the SDK's report is cumulative).
  for (const c of report.canaries) {
    const before = ctx.stats.trust.get(c.peerId)
    const fresh = c.observations - (before?.observations ?? 0)
    if (fresh > 0) ctx.metrics?.canary(c.excluded && !before?.excluded ? 'excluded' : 'pass', fresh)
  }
  ctx.stats.finished(
    {
      at: Date.now(),
      endpoint: req.endpoint,
      promptTokens: o.promptTokens,
      completionTokens: o.completionTokens,
      ms: Math.round(o.ms),
      route: report.routes[report.routes.length - 1] ?? [],
      failovers: report.failovers,
      finish: o.finishReason
    },
    report
  )
  ctx.log.info(
    {
      endpoint: req.endpoint,
      promptTokens: o.promptTokens,
      completionTokens: o.completionTokens,
      ms: Math.round(o.ms),
      failovers: report.failovers
    },
    'generation'
  )
}
