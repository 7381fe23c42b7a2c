import { randomBytes } from 'node:crypto'
import type { FastifyInstance } from 'fastify'
import { type ChatTurn, chatTurn } from './chat-route.js'
import type { ChatFormatter, ChatMessage } from './chat-template.js'
import { reportOf } from './choices.js'
import { type ApiError, invalidRequest, toApiError } from './errors.js'
import { type GatewayContext, type GenerationOutcome, runGeneration } from './generation.js'
import { checkParameters } from './parameters.js'
import { reportHeader } from './report.js'
import type { AgentParams } from './request-agent.js'
import { commonParams, requireObject } from './request-params.js'
import { SseStream } from './sse.js'
import { type ParsedCall, parseToolCalls, type ToolDefinition } from './tools/tools-format.js'
import { RewindableToolStream } from './tools/tools-rollback.js'

/**
 * The Anthropic Messages API (issue 37): POST /v1/messages with `system`, content blocks (text,
 * tool_use, tool_result), `tools`/`tool_choice`, streaming events and `x-api-key` auth, over the
 * same generation as /v1/chat/completions. Errors take Anthropic's shape.
 */
export function anthropicError(api: ApiError) {
  const type =
    api.status === 401
      ? 'authentication_error'
      : api.status === 404
        ? 'not_found_error'
        : api.status === 429
          ? 'rate_limit_error'
          : api.status >= 500
            ? 'api_error'
            : 'invalid_request_error'
  return { type: 'error', error: { type, message: api.message } }
}

type Block = {
  type?: unknown
  text?: unknown
  id?: unknown
  name?: unknown
  input?: unknown
  tool_use_id?: unknown
  content?: unknown
}

const textOf = (c: unknown, where: string): string => {
  if (typeof c === 'string') return c
  if (Array.isArray(c) && c.every((b: Block) => b?.type === 'text' && typeof b.text === 'string'))
    return c.map((b: Block) => b.text).join('')
  throw invalidRequest(`${where}: expected a string or text blocks`, where)
}

/** Anthropic messages → the chat messages templates read. */
export function anthropicMessages(body: Record<string, unknown>): ChatMessage[] {
  const out: ChatMessage[] = []
  if (body.system !== undefined) out.push({ role: 'system', content: textOf(body.system, 'system') })
  if (!Array.isArray(body.messages) || body.messages.length === 0)
    throw invalidRequest('messages: expected a non-empty array', 'messages')
  body.messages.forEach((m: { role?: unknown; content?: unknown }, i) => {
    if (m?.role !== 'user' && m?.role !== 'assistant') throw invalidRequest(`messages.${i}.role: expected user or assistant`)
    const blocks: Block[] = typeof m.content === 'string' ? [{ type: 'text', text: m.content }] : (m.content as Block[])
    if (!Array.isArray(blocks)) throw invalidRequest(`messages.${i}.content: expected a string or blocks`)
    const text = blocks.filter((b) => b?.type === 'text').map((b) => String(b.text))
    const uses = blocks.filter((b) => b?.type === 'tool_use')
    for (const r of blocks.filter((b) => b?.type === 'tool_result'))
      out.push({ role: 'tool', tool_call_id: String(r.tool_use_id), content: textOf(r.content ?? '', `messages.${i}.content`) })
    if (text.length > 0 || uses.length > 0)
      out.push({
        role: m.role,
        content: text.join(''),
        ...(uses.length > 0
          ? {
              tool_calls: uses.map((u) => ({
                id: String(u.id),
                type: 'function' as const,
                function: { name: String(u.name), arguments: JSON.stringify(u.input ?? {}) }
              }))
            }
          : {})
      })
  })
  return out
}

function anthropicAgent(body: Record<string, unknown>): AgentParams {
  const tools: ToolDefinition[] = (Array.isArray(body.tools) ? body.tools : []).map(
    (t: { name?: unknown; description?: unknown; input_schema?: unknown }) => {
      if (typeof t?.name !== 'string') throw invalidRequest('tools: each tool needs a name', 'tools')
      return {
        type: 'function',
        function: {
          name: t.name,
          description: String(t.description ?? ''),
          parameters: (t.input_schema ?? { type: 'object' }) as object
        }
      }
    }
  )
  const c = body.tool_choice as { type?: unknown; name?: unknown } | undefined
  let toolChoice: AgentParams['toolChoice'] = tools.length > 0 ? 'auto' : 'none'
  if (c?.type === 'any') toolChoice = 'required'
  else if (c?.type === 'none') toolChoice = 'none'
  else if (c?.type === 'tool') {
    if (!tools.some((t) => t.function.name === c.name)) throw invalidRequest(`tool_choice: no tool named ${String(c.name)}`)
    toolChoice = { name: String(c.name) }
  }
  return { n: 1, tools, toolChoice, parallelToolCalls: true }
}

const toolUse = (c: ParsedCall) => ({
  type: 'tool_use',
  id: `toolu_${c.id.slice(5)}`,
  name: c.name,
  input: JSON.parse(c.arguments || '{}')
})

export function registerAnthropicRoutes(app: FastifyInstance, ctx: GatewayContext, served: string[], chat: ChatFormatter): void {
  app.post('/v1/messages', async (req, reply) => {
    const body = requireObject(req.body)
    checkParameters('/v1/messages', body)
    if (typeof body.max_tokens !== 'number') throw invalidRequest('max_tokens: Field required', 'max_tokens')
    const params = commonParams(
      {
        model: body.model,
        max_tokens: body.max_tokens,
        temperature: body.temperature,
        top_p: body.top_p,
        stop: body.stop_sequences,
        stream: body.stream
      },
      served
    )
    const turn: ChatTurn = chatTurn(chat, anthropicMessages(body), anthropicAgent(body))
    const id = `msg_${randomBytes(12).toString('base64url')}`
    const ac = new AbortController()
    reply.raw.once('close', () => {
      if (!reply.raw.writableFinished) ac.abort()
    })
    const request = {
      endpoint: 'chat' as const,
      prompt: turn.prompt,
      params,
      formatStops: chat.stops,
      special: chat.kind === 'template',
      promptTemplate: (text: string) => chat.render([{ role: 'user', content: text }]),
      ...(turn.grammar ? { grammar: turn.grammar } : {}),
      signal: ac.signal
    }
    const stopReason = (o: GenerationOutcome, calls: number) =>
      calls > 0 ? 'tool_use' : o.finishReason === 'length' ? 'max_tokens' : 'end_turn'
    if (!params.stream) {
      const o = await runGeneration(ctx, request)
      const parsed = turn.family ? parseToolCalls(turn.family, o.text) : { content: o.text, calls: [] }
      reply.header('x-layerswarm-verification', reportHeader(o.result.report))
      return {
        id,
        type: 'message',
        role: 'assistant',
        model: params.model,
        content: [...(parsed.content ? [{ type: 'text', text: parsed.content }] : []), ...parsed.calls.map(toolUse)],
        stop_reason: stopReason(o, parsed.calls.length),
        stop_sequence: null,
        usage: { input_tokens: o.promptTokens, output_tokens: o.completionTokens },
        layerswarm: reportOf(ctx, [o])
      }
    }
    let sse: SseStream | undefined
    let block = -1
    let textOpen = false
    let calls = 0
    const inputTokens = ctx.client.tokenizer.encode(turn.prompt, { special: request.special }).length
    const open = (): SseStream => {
      if (sse) return sse
      sse = new SseStream(reply, { 'x-layerswarm-model-id': ctx.client.modelId })
      const message = {
        id,
        type: 'message',
        role: 'assistant',
        model: params.model,
        content: [],
        stop_reason: null,
        stop_sequence: null
      }
      sse.event('message_start', {
        type: 'message_start',
        message: { ...message, usage: { input_tokens: inputTokens, output_tokens: 0 } }
      })
      return sse
    }
    const closeText = (s: SseStream) => {
      if (textOpen) s.event('content_block_stop', { type: 'content_block_stop', index: block })
      textOpen = false
    }
    const emit = (out: { content: string; calls: ParsedCall[] }) => {
      const s = open()
      if (out.content) {
        if (!textOpen) {
          block++
          textOpen = true
          s.event('content_block_start', { type: 'content_block_start', index: block, content_block: { type: 'text', text: '' } })
        }
        s.event('content_block_delta', {
          type: 'content_block_delta',
          index: block,
          delta: { type: 'text_delta', text: out.content }
        })
      }
      for (const c of out.calls) {
        closeText(s)
        block++
        calls++
        const use = toolUse(c)
        s.event('content_block_start', { type: 'content_block_start', index: block, content_block: { ...use, input: {} } })
        s.event('content_block_delta', {
          type: 'content_block_delta',
          index: block,
          delta: { type: 'input_json_delta', partial_json: c.arguments }
        })
        s.event('content_block_stop', { type: 'content_block_stop', index: block })
      }
    }
    const tools = turn.family ? new RewindableToolStream(turn.family) : undefined
    try {
      const o = await runGeneration(
        ctx,
        request,
        (text) => emit(tools?.push(text) ?? { content: text, calls: [] }),
        (offset, text, convicted) => {
          if (!tools) return open().event('layerswarm', { type: 'layerswarm.rollback', offset, text, convicted })
          // with tools: text characters (over the text blocks) and tool_use blocks kept, then the honest calls
          const r = tools.rollback(offset, text)
          calls = r.keptCalls
          closeText(open())
          open().event('layerswarm', {
            type: 'layerswarm.rollback',
            offset: r.offset,
            text: r.text,
            tool_calls: r.keptCalls,
            convicted
          })
          emit({ content: '', calls: r.calls })
        }
      )
      if (tools) emit(tools.flush())
      const s = open()
      closeText(s)
      s.event('message_delta', {
        type: 'message_delta',
        delta: { stop_reason: stopReason(o, calls), stop_sequence: null },
        usage: { output_tokens: o.completionTokens },
        layerswarm: reportOf(ctx, [o])
      })
      s.event('message_stop', { type: 'message_stop' })
      s.end()
      return reply
    } catch (err) {
      if (!sse) throw err
      sse.event('error', anthropicError(toApiError(err)))
      sse.end()
      return reply
    }
  })
}
