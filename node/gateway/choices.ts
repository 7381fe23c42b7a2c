import type { AbortOptions } from '@libp2p/interface'
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { TokenLogprobs } from '../../shards/index.js'
import { toApiError } from './errors.js'
import { type GatewayContext, type GenerationOutcome, type GenerationRequest, runGeneration } from './generation.js'
import { reportHeader, reportJson } from './report.js'
import { SseStream } from './sse.js'

/**
 * One request's `n` choices (issue 37), streamed or whole. Choice i samples with seed + i, so a
 * seeded request gives the same n choices again. Choices run one after another through the same
 * gateway slot (the swarm session of each is its own: see docs/gateway.md on `n`).
 */
export interface ChoiceFormat {
  /** Stream chunks for text (and its tokens' logprobs) of choice `index`. */
  delta(index: number, text: string, logprobs?: TokenLogprobs[]): Record<string, unknown>[]
  /** Stream chunks that end choice `index` (tool-call deltas, finish_reason). */
  finish(index: number, o: GenerationOutcome): Record<string, unknown>[]
  /** The whole response body (without usage and layerswarm). */
  whole(outcomes: GenerationOutcome[]): Record<string, unknown>
  /** A chunk with no choices (the usage chunk of stream_options.include_usage). */
  empty(): Record<string, unknown>
  /**
   * Choice `index`'s rollback in the terms its stream used (tool calls: content offsets and calls
   * kept), and chunks that follow it; absent: the text offset as the generation gives it.
   */
  rollback?(index: number, offset: number, text: string): { said: Record<string, unknown>; chunks: Record<string, unknown>[] }
}

export const usageOf = (os: readonly GenerationOutcome[]) => {
  // the prompt is counted once: every choice continues the same prompt tokens
  const prompt = os[0]?.promptTokens ?? 0
  const completion = os.reduce((a, o) => a + o.completionTokens, 0)
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion }
}

export function reportOf(ctx: GatewayContext, os: readonly GenerationOutcome[]): Record<string, unknown> {
  const one = (o: GenerationOutcome) =>
    reportJson(ctx.client.modelId, o.result.report, o.result.convicted, o.ms, o.completionTokens, {
      mode: o.speculate,
      stats: o.result.speculation
    })
  return { ...one(os[0]), ...(os.length > 1 ? { choices: os.map(one) } : {}) }
}

export interface ChoicesRun {
  readonly ctx: GatewayContext
  readonly req: FastifyRequest
  readonly reply: FastifyReply
  readonly request: Omit<GenerationRequest, 'signal'>
  readonly n: number
  readonly format: ChoiceFormat
}

/** `signal`: the caller's own abort (the client hanging up aborts too). */
export async function respondChoices(run: ChoicesRun, { signal }: AbortOptions = {}): Promise<unknown> {
  const { ctx, req, reply, request, n, format } = run
  const ac = new AbortController()
  signal?.addEventListener('abort', () => ac.abort(signal.reason), { once: true })
  reply.raw.once('close', () => {
    if (!reply.raw.writableFinished) ac.abort()
  })
  const seed = request.params.seed ?? Math.floor(Math.random() * 2 ** 31)
  const choice = (i: number): GenerationRequest => ({
    ...request,
    params: { ...request.params, seed: seed + i },
    signal: ac.signal
  })
  if (!request.params.stream) {
    const outcomes: GenerationOutcome[] = []
    for (let i = 0; i < n; i++) outcomes.push(await runGeneration(ctx, choice(i)))
    reply.header('x-layerswarm-verification', reportHeader(outcomes[0].result.report))
    reply.header('x-layerswarm-model-id', ctx.client.modelId)
    return { ...format.whole(outcomes), usage: usageOf(outcomes), layerswarm: reportOf(ctx, outcomes) }
  }
  let sse: SseStream | undefined
  const open = (): SseStream => {
    sse ??= new SseStream(reply, { 'x-layerswarm-model-id': ctx.client.modelId })
    return sse
  }
  try {
    const outcomes: GenerationOutcome[] = []
    for (let i = 0; i < n; i++) {
      const o = await runGeneration(
        ctx,
        choice(i),
        (text, lps) => {
          for (const c of format.delta(i, text, lps)) open().send(c)
        },
        // text already sent came through a convicted peer: from `offset` on, choice i's text is `text`
        (offset, text, convicted) => {
          const own = format.rollback?.(i, offset, text)
          open().event('layerswarm', {
            object: 'layerswarm.rollback',
            choices: [],
            layerswarm: { type: 'rollback', index: i, offset, text, ...own?.said, convicted }
          })
          for (const c of own?.chunks ?? []) open().send(c)
        }
      )
      outcomes.push(o)
      const ends = format.finish(i, o)
      ends.forEach((c, k) => {
        // the last chunk of the last choice carries usage and the verification report
        const last = i === n - 1 && k === ends.length - 1
        open().send(last ? { ...c, usage: usageOf(outcomes), layerswarm: reportOf(ctx, outcomes) } : c)
      })
    }
    const s = open()
    if (request.params.includeUsage) s.send({ ...format.empty(), usage: usageOf(outcomes) })
    s.done()
    ctx.metrics?.bytes('out', s.bytes)
    return reply
  } catch (err) {
    if (!sse) throw err
    // Headers are gone: the error travels as an event, which the openai client raises as an APIError.
    sse.send(toApiError(err).toJSON())
    sse.end()
    req.log.warn({ err }, 'generation failed mid-stream')
    return reply
  }
}
