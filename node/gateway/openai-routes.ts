import { randomBytes } from 'node:crypto'
import type { FastifyInstance } from 'fastify'
import type { TokenLogprobs } from '../../shards/index.js'
import { registerChatRoute } from './chat-route.js'
import type { ChatFormatter } from './chat-template.js'
import { type ChoiceFormat, respondChoices } from './choices.js'
import type { GatewayContext } from './generation.js'
import { completionLogprobs } from './logprobs-format.js'
import { checkParameters } from './parameters.js'
import { agentParams } from './request-agent.js'
import { commonParams, completionPrompt, requireObject } from './request-params.js'

export interface OpenAiRoutesInit {
  readonly ctx: GatewayContext
  /** The id clients pass as `model` (the file's name); the model hash id is accepted too. */
  readonly modelName: string
  readonly chat: ChatFormatter
  /** Readable, from the GGUF metadata: `layerswarm.name` in /v1/models (issue 33 item 5). */
  readonly displayName?: string
}

const created = Math.floor(Date.now() / 1000)
const newId = (prefix: string): string => `${prefix}-${randomBytes(12).toString('base64url')}`

export function registerOpenAiRoutes(app: FastifyInstance, init: OpenAiRoutesInit): void {
  const { ctx, modelName, chat } = init
  const served = [modelName, ctx.client.modelId]
  const model = {
    id: modelName,
    object: 'model',
    created,
    owned_by: 'layerswarm',
    layerswarm: { model_id: ctx.client.modelId, chat_format: chat.kind, ...(init.displayName ? { name: init.displayName } : {}) }
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
    checkParameters('/v1/completions', body)
    const params = commonParams(body, served)
    const agent = agentParams(body, 'completions')
    const prompt = completionPrompt(body)
    const id = newId('cmpl')
    const offsets = new Map<number, number>()
    const lpsOf = (i: number, text: string, lps?: TokenLogprobs[]) => {
      const at = offsets.get(i) ?? 0
      offsets.set(i, at + text.length)
      return lps ? completionLogprobs(ctx.client.tokenizer, lps, at) : null
    }
    const chunk = (index: number, text: string, finish: string | null, logprobs: unknown = null) => ({
      id,
      object: 'text_completion',
      created: Math.floor(Date.now() / 1000),
      model: params.model,
      choices: [{ text, index, logprobs, finish_reason: finish }]
    })
    const format: ChoiceFormat = {
      delta: (i, text, lps) => [chunk(i, text, null, lpsOf(i, text, lps))],
      finish: (i, o) => [chunk(i, '', o.finishReason)],
      whole: (outcomes) => ({
        id,
        object: 'text_completion',
        created: Math.floor(Date.now() / 1000),
        model: params.model,
        system_fingerprint: fingerprint(),
        choices: outcomes.map((o, index) => ({
          text: o.text,
          index,
          logprobs: o.logprobs ? completionLogprobs(ctx.client.tokenizer, o.logprobs) : null,
          finish_reason: o.finishReason
        }))
      }),
      empty: () => ({ ...chunk(0, '', null), choices: [] })
    }
    const request = {
      endpoint: 'completions' as const,
      prompt,
      params,
      ...(agent.topLogprobs !== undefined ? { topLogprobs: agent.topLogprobs } : {})
    }
    return await respondChoices({ ctx, req, reply, request, n: agent.n, format })
  })

  registerChatRoute(app, ctx, served, chat)

  const fingerprint = (): string => `layerswarm-${ctx.client.modelId.slice(0, 12)}`
}
