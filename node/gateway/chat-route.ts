import { randomBytes } from 'node:crypto'
import type { FastifyInstance } from 'fastify'
import type { GrammarNode } from '../../shards/index.js'
import type { ChatFormatter, ChatMessage } from './chat-template.js'
import { type ChoiceFormat, respondChoices } from './choices.js'
import type { GatewayContext, GenerationOutcome } from './generation.js'
import { chatLogprobs } from './logprobs-format.js'
import { checkParameters } from './parameters.js'
import { type AgentParams, agentParams } from './request-agent.js'
import { chatMessages, commonParams, requireObject } from './request-params.js'
import {
  callGrammar,
  type ParsedCall,
  parseToolCalls,
  renderWithTools,
  type ToolFamily,
  toolFamily
} from './tools/tools-format.js'
import { RewindableToolStream } from './tools/tools-rollback.js'

/**
 * /v1/chat/completions (issue 37): text, tools (rendered with the model's template, parsed back
 * into tool_calls), structured output (response_format, by constrained sampling), logprobs and
 * n choices. The verification report rides in the `layerswarm` field and header as before.
 */
export interface ChatTurn {
  readonly prompt: string
  readonly grammar?: GrammarNode
  /** Parse tool calls out of the completion (tools given and tool_choice not none). */
  readonly family?: ToolFamily
}

/** The prompt, grammar and tool parsing of a chat request (shared with /v1/messages). */
export function chatTurn(chat: ChatFormatter, messages: ChatMessage[], agent: AgentParams): ChatTurn {
  const useTools = agent.tools.length > 0 && agent.toolChoice !== 'none'
  const prompt = renderWithTools(chat, messages, useTools ? agent.tools : [])
  if (!useTools) return { prompt, grammar: agent.grammar }
  const family = toolFamily(chat)
  const choice = agent.toolChoice
  // required / a named function: the call is constrained, so its arguments always parse
  if (choice === 'required') return { prompt, family, grammar: callGrammar(family, agent.tools) }
  if (typeof choice === 'object')
    return {
      prompt,
      family,
      grammar: callGrammar(
        family,
        agent.tools.filter((t) => t.function.name === choice.name)
      )
    }
  return { prompt, family, grammar: agent.grammar }
}

const toolCallsJson = (calls: readonly ParsedCall[]) =>
  calls.map((c) => ({ id: c.id, type: 'function' as const, function: { name: c.name, arguments: c.arguments } }))

export function registerChatRoute(app: FastifyInstance, ctx: GatewayContext, served: string[], chat: ChatFormatter): void {
  const fingerprint = (): string => `layerswarm-${ctx.client.modelId.slice(0, 12)}`
  app.post('/v1/chat/completions', async (req, reply) => {
    const body = requireObject(req.body)
    checkParameters('/v1/chat/completions', body)
    const params = commonParams(body, served)
    const agent = agentParams(body, 'chat')
    const turn = chatTurn(chat, chatMessages(body), agent)
    const id = `chatcmpl-${randomBytes(12).toString('base64url')}`
    const chunk = (index: number, delta: Record<string, unknown>, finish: string | null, logprobs: unknown = null) => ({
      id,
      object: 'chat.completion.chunk',
      created: Math.floor(Date.now() / 1000),
      model: params.model,
      system_fingerprint: fingerprint(),
      choices: [{ index, delta, logprobs, finish_reason: finish }]
    })
    const started = new Set<number>()
    const streams = new Map<number, RewindableToolStream>()
    const callCount = new Map<number, number>()
    // The first delta of a choice names the role, as OpenAI's streams do.
    const role = (i: number): Record<string, string> => {
      if (started.has(i)) return {}
      started.add(i)
      return { role: 'assistant' }
    }
    const emit = (i: number, out: { content: string; calls: ParsedCall[] }, lps?: unknown) => {
      const chunks: Record<string, unknown>[] = []
      if (out.content || lps) chunks.push(chunk(i, { ...role(i), content: out.content }, null, lps ?? null))
      out.calls.forEach((c) => {
        const k = callCount.get(i) ?? 0
        callCount.set(i, k + 1)
        // OpenAI streams a call as its id and name, then the arguments as deltas
        chunks.push(
          chunk(
            i,
            { ...role(i), tool_calls: [{ index: k, id: c.id, type: 'function', function: { name: c.name, arguments: '' } }] },
            null
          )
        )
        chunks.push(chunk(i, { tool_calls: [{ index: k, function: { arguments: c.arguments } }] }, null))
      })
      return chunks
    }
    const streamOf = (i: number): RewindableToolStream | undefined => {
      if (!turn.family) return undefined
      let s = streams.get(i)
      if (!s) streams.set(i, (s = new RewindableToolStream(turn.family)))
      return s
    }
    const format: ChoiceFormat = {
      delta(i, text, lps) {
        const out = streamOf(i)?.push(text) ?? { content: text, calls: [] }
        return emit(
          i,
          out,
          lps && lps.length > 0 ? { content: chatLogprobs(ctx.client.tokenizer, lps), refusal: null } : undefined
        )
      },
      finish(i, o) {
        const rest = streamOf(i)?.flush()
        const chunks = rest ? emit(i, rest) : []
        if (!started.has(i)) chunks.push(chunk(i, { role: 'assistant', content: '' }, null))
        started.add(i)
        chunks.push(chunk(i, {}, (callCount.get(i) ?? 0) > 0 ? 'tool_calls' : o.finishReason))
        return chunks
      },
      whole: (outcomes) => ({
        id,
        object: 'chat.completion',
        created: Math.floor(Date.now() / 1000),
        model: params.model,
        system_fingerprint: fingerprint(),
        choices: outcomes.map((o, index) => wholeChoice(o, index, turn.family, ctx))
      }),
      empty: () => ({ ...chunk(0, {}, null), choices: [] }),
      // with tools, a rollback counts content characters and whole calls (calls from
      // `tool_calls` on were void), then the honest text's calls go out again
      ...(turn.family
        ? {
            rollback(i: number, offset: number, text: string) {
              const r = streamOf(i)!.rollback(offset, text)
              callCount.set(i, r.keptCalls)
              return {
                said: { offset: r.offset, text: r.text, tool_calls: r.keptCalls },
                chunks: emit(i, { content: '', calls: r.calls })
              }
            }
          }
        : {})
    }
    return await respondChoices({
      ctx,
      req,
      reply,
      n: agent.n,
      format,
      request: {
        endpoint: 'chat',
        prompt: turn.prompt,
        params,
        formatStops: chat.stops,
        special: chat.kind === 'template',
        // secret canaries go through the same format (client/canary-template.ts)
        promptTemplate: (text: string) => chat.render([{ role: 'user', content: text }]),
        ...(turn.grammar ? { grammar: turn.grammar } : {}),
        ...(agent.topLogprobs !== undefined ? { topLogprobs: agent.topLogprobs } : {})
      }
    })
  })
}

function wholeChoice(o: GenerationOutcome, index: number, family: ToolFamily | undefined, ctx: GatewayContext) {
  const parsed = family ? parseToolCalls(family, o.text) : { content: o.text, calls: [] }
  return {
    index,
    message: {
      role: 'assistant',
      content: parsed.content,
      refusal: null,
      ...(parsed.calls.length > 0 ? { tool_calls: toolCallsJson(parsed.calls) } : {})
    },
    logprobs: o.logprobs ? { content: chatLogprobs(ctx.client.tokenizer, o.logprobs), refusal: null } : null,
    finish_reason: parsed.calls.length > 0 ? 'tool_calls' : o.finishReason
  }
}
