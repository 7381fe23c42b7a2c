import type { ChatMessage } from './chat-template.js'
import { ApiError, invalidRequest } from './errors.js'
import { toolFields } from './request-agent.js'

/** What a completion request asks of a generation, checked. */
export interface GenerationParams {
  readonly model: string
  /** undefined: until the model's context ends (chat), or OpenAI's default of 16 (completions). */
  readonly maxTokens?: number
  readonly temperature: number
  readonly topP: number
  readonly seed?: number
  readonly stop: string[]
  readonly stream: boolean
  readonly includeUsage: boolean
  /** `layerswarm.speculate`: speculative steps for this request (default: the gateway's --speculate). */
  readonly speculate?: RequestSpeculate
}

/** What a request may ask of speculation: `draft` is the gateway's own draft model, if it has one. */
export type RequestSpeculate = 'off' | 'ngram' | 'self' | 'draft'
const REQUEST_SPECULATE: readonly RequestSpeculate[] = ['off', 'ngram', 'self', 'draft']

type Body = Record<string, unknown>

const ROLES = new Set(['system', 'user', 'assistant', 'developer', 'tool'])

export function requireObject(body: unknown): Body {
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw invalidRequest('The request body must be a JSON object.')
  return body as Body
}

function num(b: Body, key: string, min: number, max: number, fallback: number): number {
  const v = b[key]
  if (v === undefined || v === null) return fallback
  if (typeof v !== 'number' || !Number.isFinite(v) || v < min || v > max) {
    throw invalidRequest(
      `Invalid '${key}': expected a number between ${min} and ${max}, got ${JSON.stringify(v)}.`,
      key,
      'invalid_value'
    )
  }
  return v
}

function optInt(b: Body, key: string, min: number): number | undefined {
  const v = b[key]
  if (v === undefined || v === null) return undefined
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min) {
    throw invalidRequest(`Invalid '${key}': expected an integer ≥ ${min}, got ${JSON.stringify(v)}.`, key, 'invalid_value')
  }
  return v
}

/** The sampling and output options both endpoints share. */
export function commonParams(b: Body, servedModels: readonly string[]): GenerationParams {
  if (typeof b.model !== 'string' || b.model === '')
    throw invalidRequest('you must provide a model parameter', 'model', 'missing_required_parameter')
  if (!servedModels.includes(b.model)) {
    throw new ApiError(
      404,
      `The model '${b.model}' does not exist; this gateway serves ${servedModels.map((m) => `'${m}'`).join(' and ')}.`,
      'invalid_request_error',
      'model_not_found',
      'model'
    )
  }
  if (b.best_of !== undefined && b.best_of !== null && b.best_of !== 1)
    throw invalidRequest("Invalid 'best_of': only 1 is supported.", 'best_of', 'unsupported_value')
  if (b.echo === true) throw invalidRequest("'echo' is not supported by this gateway.", 'echo', 'unsupported_parameter')
  if (b.stream !== undefined && b.stream !== null && typeof b.stream !== 'boolean')
    throw invalidRequest("Invalid 'stream': expected a boolean.", 'stream', 'invalid_type')
  let stop: string[] = []
  if (typeof b.stop === 'string') stop = [b.stop]
  else if (Array.isArray(b.stop)) stop = b.stop as string[]
  else if (b.stop !== undefined && b.stop !== null)
    throw invalidRequest("Invalid 'stop': expected a string or an array of strings.", 'stop', 'invalid_type')
  if (stop.length > 4 || stop.some((s) => typeof s !== 'string' || s === '')) {
    throw invalidRequest("Invalid 'stop': at most 4 non-empty strings.", 'stop', 'invalid_value')
  }
  const so = b.stream_options as { include_usage?: unknown } | undefined
  return {
    model: b.model,
    maxTokens: optInt(b, 'max_completion_tokens', 0) ?? optInt(b, 'max_tokens', 0),
    temperature: num(b, 'temperature', 0, 2, 1),
    topP: num(b, 'top_p', 0, 1, 1),
    seed: optInt(b, 'seed', 0),
    stop,
    stream: b.stream === true,
    includeUsage: typeof so === 'object' && so !== null && so.include_usage === true,
    ...layerswarmParams(b)
  }
}

/**
 * The request's own `layerswarm` object (the field responses carry the verification report in):
 * options of the swarm a request may set. Unknown keys are refused, so a misspelt one is not
 * silently ignored. A draft model is named by the gateway's operator (--speculate draft:F), never
 * by a request: a request names a path on the gateway's host with nothing.
 */
function layerswarmParams(b: Body): { speculate?: RequestSpeculate } {
  const ls = b.layerswarm
  if (ls === undefined || ls === null) return {}
  if (typeof ls !== 'object' || Array.isArray(ls))
    throw invalidRequest("Invalid 'layerswarm': expected an object.", 'layerswarm', 'invalid_type')
  for (const key of Object.keys(ls)) {
    if (key !== 'speculate')
      throw invalidRequest(
        `Unknown parameter 'layerswarm.${key}': the request may set layerswarm.speculate.`,
        `layerswarm.${key}`,
        'unknown_parameter'
      )
  }
  const v = (ls as Body).speculate
  if (v === undefined || v === null) return {}
  if (typeof v !== 'string' || !REQUEST_SPECULATE.includes(v as RequestSpeculate)) {
    throw invalidRequest(
      `Invalid 'layerswarm.speculate': expected one of ${REQUEST_SPECULATE.map((m) => `'${m}'`).join(', ')}, got ${JSON.stringify(v)}.`,
      'layerswarm.speculate',
      'invalid_value'
    )
  }
  return { speculate: v as RequestSpeculate }
}

/** `prompt` of /v1/completions: a string, or an array holding one string. */
export function completionPrompt(b: Body): string {
  const p = b.prompt
  if (typeof p === 'string') return p
  if (Array.isArray(p) && p.length === 1 && typeof p[0] === 'string') return p[0]
  if (Array.isArray(p) && p.length > 1 && p.every((x) => typeof x === 'string')) {
    throw invalidRequest("Invalid 'prompt': one prompt per request (batches are not supported).", 'prompt', 'unsupported_value')
  }
  if (p === undefined || p === null)
    throw invalidRequest('you must provide a prompt parameter', 'prompt', 'missing_required_parameter')
  throw invalidRequest("Invalid 'prompt': expected a string (token arrays are not supported).", 'prompt', 'invalid_type')
}

/** `messages` of /v1/chat/completions; content parts of type text are joined. */
export function chatMessages(b: Body): ChatMessage[] {
  const ms = b.messages
  if (!Array.isArray(ms) || ms.length === 0)
    throw invalidRequest(
      "Invalid 'messages': expected a non-empty array.",
      'messages',
      ms === undefined ? 'missing_required_parameter' : 'invalid_value'
    )
  return ms.map((m: unknown, i) => {
    const o = (typeof m === 'object' && m !== null ? m : {}) as { role?: unknown; content?: unknown; tool_calls?: unknown }
    if (typeof o.role !== 'string' || !ROLES.has(o.role)) {
      throw invalidRequest(
        `Invalid 'messages[${i}].role': expected one of ${[...ROLES].join(', ')}.`,
        `messages[${i}].role`,
        'invalid_value'
      )
    }
    let content: string
    if (typeof o.content === 'string') content = o.content
    else if ((o.content === null || o.content === undefined) && o.role === 'assistant' && o.tool_calls) content = ''
    else if (o.content === null && o.role === 'assistant') content = ''
    else if (
      Array.isArray(o.content) &&
      o.content.every((p) => p && typeof p === 'object' && p.type === 'text' && typeof p.text === 'string')
    ) {
      content = o.content.map((p: { text: string }) => p.text).join('')
    } else {
      throw invalidRequest(
        `Invalid 'messages[${i}].content': expected a string or text parts.`,
        `messages[${i}].content`,
        'invalid_type'
      )
    }
    return { role: o.role as ChatMessage['role'], content, ...toolFields(o as Record<string, unknown>, i) }
  })
}
