import { randomBytes } from 'node:crypto'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { ChatFormatter } from './chat-template.js'
import { toApiError } from './errors.js'
import { type GatewayContext, type GenerationOutcome, type GenerationRequest, runGeneration } from './generation.js'
import { reportHeader, reportJson } from './report.js'
import { chatMessages, commonParams, completionPrompt, type GenerationParams, requireObject } from './request-params.js'
import { SseStream } from './sse.js'

export interface OpenAiRoutesInit {
  readonly ctx: GatewayContext
  /** The id clients pass as `model` (the file's name); the model hash id is accepted too. */
  readonly modelName: string
  readonly chat: ChatFormatter
}

const created = Math.floor(Date.now() / 1000)
const newId = (prefix: string): string => `${prefix}-${randomBytes(12).toString('base64url')}`
const usage = (o: GenerationOutcome) => ({
  prompt_tokens: o.promptTokens,
  completion_tokens: o.completionTokens,
  total_tokens: o.promptTokens + o.completionTokens
})

export function registerOpenAiRoutes(app: FastifyInstance, init: OpenAiRoutesInit): void {
  const { ctx, modelName, chat } = init
  const served = [modelName, ctx.client.modelId]
  const model = {
    id: modelName,
    object: 'model',
    created,
    owned_by: 'layerswarm',
    layerswarm: { model_id: ctx.client.modelId, chat_format: chat.kind }
  }

  app.get('/v1/models', async () => ({ object: 'list', data: [model] }))
  app.get<{ Params: { id: string } }>('/v1/models/:id', async (req, reply) => {
    if (served.includes(req.params.id)) return model
    return reply.code(404).send({
      error: {
        message: `The model '${req.params.id}' does not exist`,
        type: 'invalid_request_error',
        param: 'model',
        code: 'model_not_found'
      }
    })
  })

  app.post('/v1/completions', async (req, reply) => {
    const body = requireObject(req.body)
    const params = commonParams(body, served)
    const prompt = completionPrompt(body)
    const id = newId('cmpl')
    const chunk = (text: string, finish: string | null) => ({
      id,
      object: 'text_completion',
      created: Math.floor(Date.now() / 1000),
      model: params.model,
      choices: [{ text, index: 0, logprobs: null, finish_reason: finish }]
    })
    return await respond(req, reply, { endpoint: 'completions', prompt, params }, chunk, (o) => ({
      id,
      object: 'text_completion',
      created: Math.floor(Date.now() / 1000),
      model: params.model,
      system_fingerprint: fingerprint(),
      choices: [{ text: o.text, index: 0, logprobs: null, finish_reason: o.finishReason }],
      usage: usage(o)
    }))
  })

  app.post('/v1/chat/completions', async (req, reply) => {
    const body = requireObject(req.body)
    const params = commonParams(body, served)
    const prompt = chat.render(chatMessages(body))
    const id = newId('chatcmpl')
    let first = true
    const chunk = (text: string, finish: string | null) => {
      // The first delta names the role, as OpenAI's streams do; clients build the message from it.
      const delta = first ? { role: 'assistant', content: text } : finish ? {} : { content: text }
      first = false
      return {
        id,
        object: 'chat.completion.chunk',
        created: Math.floor(Date.now() / 1000),
        model: params.model,
        system_fingerprint: fingerprint(),
        choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }]
      }
    }
    return await respond(
      req,
      reply,
      {
        endpoint: 'chat',
        prompt,
        params,
        formatStops: chat.stops,
        special: chat.kind === 'template',
        // secret canaries go through the same format (client/verification/canary-template.ts)
        promptTemplate: (text: string) => chat.render([{ role: 'user', content: text }])
      },
      chunk,
      (o) => ({
        id,
        object: 'chat.completion',
        created: Math.floor(Date.now() / 1000),
        model: params.model,
        system_fingerprint: fingerprint(),
        choices: [
          {
            index: 0,
            message: { role: 'assistant', content: o.text, refusal: null },
            logprobs: null,
            finish_reason: o.finishReason
          }
        ],
        usage: usage(o)
      })
    )
  })

  const fingerprint = (): string => `layerswarm-${ctx.client.modelId.slice(0, 12)}`

  async function respond(
    req: FastifyRequest,
    reply: FastifyReply,
    r: Omit<GenerationRequest, 'signal'> & { params: GenerationParams },
    chunk: (text: string, finish: string | null) => Record<string, unknown>,
    whole: (o: GenerationOutcome) => Record<string, unknown>
  ): Promise<unknown> {
    const ac = new AbortController()
    // A client that hangs up should free its swarm session at once.
    reply.raw.once('close', () => {
      if (!reply.raw.writableFinished) ac.abort()
    })
    const request: GenerationRequest = { ...r, signal: ac.signal }
    if (!r.params.stream) {
      const o = await runGeneration(ctx, request)
      reply.header('x-layerswarm-verification', reportHeader(o.result.report))
      reply.header('x-layerswarm-model-id', ctx.client.modelId)
      return {
        ...whole(o),
        layerswarm: reportJson(ctx.client.modelId, o.result.report, o.result.convicted, o.ms, o.completionTokens, {
          mode: o.speculate,
          stats: o.result.speculation
        })
      }
    }
    // The stream opens with the first text, so errors before it (no route, busy) keep their status codes.
    let sse: SseStream | undefined
    const open = (): SseStream => {
      sse ??= new SseStream(reply, { 'x-layerswarm-model-id': ctx.client.modelId })
      return sse
    }
    try {
      const o = await runGeneration(
        ctx,
        request,
        (text) => open().send(chunk(text, null)),
        // text already sent came through a convicted peer: from `offset` on, the completion is `text`
        // (the openai SDKs hand named events on as chunks too: `choices: []` keeps them harmless)
        (offset, text, convicted) =>
          open().event('layerswarm', {
            object: 'layerswarm.rollback',
            choices: [],
            layerswarm: { type: 'rollback', offset, text, convicted }
          })
      )
      const s = open()
      const report = reportJson(ctx.client.modelId, o.result.report, o.result.convicted, o.ms, o.completionTokens, {
        mode: o.speculate,
        stats: o.result.speculation
      })
      s.send({ ...chunk('', o.finishReason), usage: usage(o), layerswarm: report })
      if (r.params.includeUsage) s.send({ ...chunk('', null), choices: [], usage: usage(o) })
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
}
