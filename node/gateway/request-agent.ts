import { anyObject, compileSchema, type GrammarNode, UnsupportedSchemaError } from '../../shards/index.js'
import type { ChatMessage } from './chat-template.js'
import { invalidRequest } from './errors.js'
import type { ToolDefinition } from './tools/tools-format.js'

/**
 * The parameters agents send (issue 37): several choices, log-probabilities, structured output
 * and tools. Checked here; what they do is in chat-route.ts, choices.ts and tools-*.ts.
 */
export interface AgentParams {
  /** Choices to sample (OpenAI `n`), each with its own seed (seed + index). */
  readonly n: number
  /** Undefined: no logprobs; else how many alternatives per token (top_logprobs; completions: logprobs). */
  readonly topLogprobs?: number
  /** The grammar `response_format` asks for (json_object or json_schema). */
  readonly grammar?: GrammarNode
  readonly tools: ToolDefinition[]
  /** none / auto / required / a function's name. */
  readonly toolChoice: 'none' | 'auto' | 'required' | { name: string }
  readonly parallelToolCalls: boolean
}

type Body = Record<string, unknown>
/** OpenAI's own limits: n ≤ 128, top_logprobs ≤ 20, completions logprobs ≤ 5. */
export const MAX_N = 128
export const MAX_TOP_LOGPROBS = 20
export const MAX_COMPLETION_LOGPROBS = 5

export function agentParams(b: Body, endpoint: 'chat' | 'completions'): AgentParams {
  const n = b.n ?? 1
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 1 || n > MAX_N)
    throw invalidRequest(`Invalid 'n': expected an integer from 1 to ${MAX_N}, got ${JSON.stringify(n)}.`, 'n', 'invalid_value')
  return {
    n,
    topLogprobs: endpoint === 'chat' ? chatLogprobs(b) : completionLogprobs(b),
    grammar: endpoint === 'chat' ? responseFormat(b.response_format) : undefined,
    tools: endpoint === 'chat' ? tools(b.tools) : [],
    toolChoice: endpoint === 'chat' ? toolChoice(b) : 'none',
    parallelToolCalls: b.parallel_tool_calls !== false
  }
}

function chatLogprobs(b: Body): number | undefined {
  const on = b.logprobs
  if (on !== undefined && on !== null && typeof on !== 'boolean')
    throw invalidRequest("Invalid 'logprobs': expected a boolean.", 'logprobs', 'invalid_type')
  const top = b.top_logprobs
  if (top === undefined || top === null) return on ? 0 : undefined
  if (typeof top !== 'number' || !Number.isInteger(top) || top < 0 || top > MAX_TOP_LOGPROBS)
    throw invalidRequest(
      `Invalid 'top_logprobs': expected an integer from 0 to ${MAX_TOP_LOGPROBS}.`,
      'top_logprobs',
      'invalid_value'
    )
  if (!on) throw invalidRequest("'top_logprobs' needs 'logprobs': true.", 'top_logprobs', 'invalid_value')
  return top
}

function completionLogprobs(b: Body): number | undefined {
  const v = b.logprobs
  if (v === undefined || v === null) return undefined
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > MAX_COMPLETION_LOGPROBS)
    throw invalidRequest(
      `Invalid 'logprobs': expected an integer from 0 to ${MAX_COMPLETION_LOGPROBS}.`,
      'logprobs',
      'invalid_value'
    )
  return v
}

function responseFormat(rf: unknown): GrammarNode | undefined {
  if (rf === undefined || rf === null) return undefined
  const o = rf as { type?: unknown; json_schema?: { schema?: unknown; name?: unknown } }
  if (o.type === 'text') return undefined
  if (o.type === 'json_object') return anyObject()
  if (o.type !== 'json_schema')
    throw invalidRequest(
      "Invalid 'response_format.type': expected 'text', 'json_object' or 'json_schema'.",
      'response_format.type',
      'invalid_value'
    )
  if (typeof o.json_schema !== 'object' || o.json_schema === null || typeof o.json_schema.name !== 'string')
    throw invalidRequest("Missing 'response_format.json_schema.name'.", 'response_format.json_schema', 'invalid_value')
  return schemaGrammar(o.json_schema.schema ?? {}, 'response_format.json_schema.schema')
}

export function schemaGrammar(schema: unknown, param: string): GrammarNode {
  try {
    return compileSchema(schema)
  } catch (err) {
    if (err instanceof UnsupportedSchemaError)
      throw invalidRequest(`Invalid '${param}': ${err.message}`, param, 'unsupported_schema')
    throw err
  }
}

function tools(t: unknown): ToolDefinition[] {
  if (t === undefined || t === null) return []
  if (!Array.isArray(t)) throw invalidRequest("Invalid 'tools': expected an array.", 'tools', 'invalid_type')
  return t.map((x, i) => {
    const f = (x as { type?: unknown; function?: { name?: unknown; parameters?: unknown } })?.function
    if ((x as { type?: unknown })?.type !== 'function' || typeof f?.name !== 'string' || !/^[\w-]{1,64}$/.test(f.name))
      throw invalidRequest(
        `Invalid 'tools[${i}]': expected {type: 'function', function: {name, parameters}}.`,
        `tools[${i}]`,
        'invalid_value'
      )
    if (f.parameters !== undefined) schemaGrammar(f.parameters, `tools[${i}].function.parameters`)
    return x as ToolDefinition
  })
}

function toolChoice(b: Body): AgentParams['toolChoice'] {
  const c = b.tool_choice
  const has = Array.isArray(b.tools) && b.tools.length > 0
  if (c === undefined || c === null) return has ? 'auto' : 'none'
  if (c === 'none' || c === 'auto' || c === 'required') {
    if (c !== 'none' && !has) throw invalidRequest(`'tool_choice' ${c} needs 'tools'.`, 'tool_choice', 'invalid_value')
    return c
  }
  const name = (c as { type?: unknown; function?: { name?: unknown } })?.function?.name
  if ((c as { type?: unknown })?.type !== 'function' || typeof name !== 'string')
    throw invalidRequest(
      "Invalid 'tool_choice': expected 'none', 'auto', 'required' or {type: 'function', function: {name}}.",
      'tool_choice',
      'invalid_value'
    )
  if (!(b.tools as ToolDefinition[] | undefined)?.some((t) => t.function.name === name))
    throw invalidRequest(`Invalid 'tool_choice': no tool named '${name}'.`, 'tool_choice', 'invalid_value')
  return { name }
}

/** An assistant message's `tool_calls`, or a tool message's id, checked. */
export function toolFields(o: Record<string, unknown>, i: number): Partial<ChatMessage> {
  if (o.role === 'tool') {
    if (typeof o.tool_call_id !== 'string')
      throw invalidRequest(`Missing 'messages[${i}].tool_call_id'.`, `messages[${i}].tool_call_id`, 'missing_required_parameter')
    return { tool_call_id: o.tool_call_id, ...(typeof o.name === 'string' ? { name: o.name } : {}) }
  }
  if (o.role !== 'assistant' || o.tool_calls === undefined || o.tool_calls === null) return {}
  if (!Array.isArray(o.tool_calls))
    throw invalidRequest(`Invalid 'messages[${i}].tool_calls'.`, `messages[${i}].tool_calls`, 'invalid_type')
  return {
    tool_calls: o.tool_calls.map((c: { id?: unknown; function?: { name?: unknown; arguments?: unknown } }, j) => {
      if (typeof c?.function?.name !== 'string' || typeof c.function.arguments !== 'string')
        throw invalidRequest(`Invalid 'messages[${i}].tool_calls[${j}]'.`, `messages[${i}].tool_calls[${j}]`, 'invalid_value')
      return {
        id: String(c.id ?? ''),
        type: 'function' as const,
        function: { name: c.function.name, arguments: c.function.arguments }
      }
    })
  }
}
