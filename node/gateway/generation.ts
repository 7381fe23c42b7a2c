import type { GenerateResult, LayerswarmClient } from '../../client/index.js'
import type { Logger } from '../log.js'
import type { Metrics } from '../metrics.js'
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
}

export interface GenerationRequest {
  readonly endpoint: 'completions' | 'chat'
  readonly prompt: string
  readonly params: GenerationParams
  /** Stop sequences of the chat format, on top of the request's. */
  readonly formatStops?: readonly string[]
  /** The prompt is a chat template's output: parse the special tokens it writes. */
  readonly special?: boolean
  readonly signal: AbortSignal
}

export interface GenerationOutcome {
  readonly text: string
  readonly promptTokens: number
  readonly completionTokens: number
  readonly finishReason: 'stop' | 'length'
  readonly result: GenerateResult
  readonly ms: number
}

/** A peer convicted mid-generation may have shaped the tokens: re-run without it (the SDK's own rule), unless already streamed. */
const MAX_RERUNS = 2

/**
 * Run one generation through the swarm. `onText` gets the completion text as it becomes safe to
 * show (stop sequences cut, never shown in part); when it is given the text cannot be taken
 * back, so a conviction is reported rather than re-run.
 */
export async function runGeneration(
  ctx: GatewayContext,
  req: GenerationRequest,
  onText?: (text: string) => void
): Promise<GenerationOutcome> {
  const promptLength = ctx.client.tokenizer.encode(req.prompt, { special: req.special ?? false }).length
  if (promptLength >= ctx.contextLength) {
    throw invalidRequest(
      `This model's maximum context length is ${ctx.contextLength} tokens; your prompt has ${promptLength}.`,
      req.endpoint === 'chat' ? 'messages' : 'prompt',
      'context_length_exceeded'
    )
  }
  if (ctx.stats.active >= ctx.maxConcurrent) {
    throw new ApiError(
      429,
      `The gateway is busy: ${ctx.stats.active} generations running (--max-concurrent ${ctx.maxConcurrent}). Retry shortly.`,
      'rate_limit_error',
      'busy'
    )
  }
  // OpenAI's defaults: 16 tokens for completions, up to the context for chat.
  const requested = req.params.maxTokens ?? (req.endpoint === 'completions' ? 16 : ctx.contextLength)
  const maxTokens = Math.min(requested, ctx.contextLength - promptLength)
  ctx.stats.sessionStarted()
  ctx.metrics?.sessionOpened()
  const t0 = performance.now()
  try {
    for (let reruns = 0; ; reruns++) {
      const out = await attempt(ctx, req, maxTokens, onText)
      const convicted = out.result.convicted
      if (convicted.length === 0 || onText || reruns >= MAX_RERUNS) {
        const ms = performance.now() - t0
        const r = out.result
        const report = { ...r.report, reruns }
        const outcome = { ...out, result: { ...r, report }, ms }
        finish(ctx, req, outcome)
        return outcome
      }
      ctx.log.warn({ convicted }, 'peers convicted by canaries during a generation: re-running it without them')
    }
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
  maxTokens: number,
  onText?: (text: string) => void
): Promise<Omit<GenerationOutcome, 'ms'>> {
  const { params } = req
  const matcher = new StopMatcher([...params.stop, ...(req.formatStops ?? [])])
  const eos = ctx.client.tokenizer.stopIds[0] ?? ctx.client.tokenizer.eosId
  let text = ''
  const it = ctx.client.stream(req.prompt, {
    maxTokens,
    temperature: params.temperature,
    topP: params.topP === 0 ? 1e-9 : params.topP,
    seed: params.seed ?? Math.floor(Math.random() * 2 ** 31),
    signal: req.signal,
    special: req.special ?? false,
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
    const now = performance.now()
    ctx.metrics?.step('decode', 1, (now - last) / 1000)
    last = now
    ctx.stats.token()
    const piece = matcher.push(r.value.text)
    if (piece) {
      text += piece
      onText?.(piece)
    }
    r = await it.next()
  }
  const rest = matcher.flush()
  if (rest) {
    text += rest
    onText?.(rest)
  }
  const result = r.value
  const finishReason = !matcher.stopped && result.tokens.length >= maxTokens ? 'length' : 'stop'
  return { text, promptTokens: result.promptTokens.length, completionTokens: result.tokens.length, finishReason, result }
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
