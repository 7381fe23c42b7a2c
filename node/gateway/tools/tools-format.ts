import { randomBytes } from 'node:crypto'
import { compileSchema, type GrammarNode, literal } from '../../../shards/index.js'
import type { ChatFormatter, ChatMessage } from '../chat-template.js'

/**
 * How each model family writes tool calls (issue 37), and how the gateway renders tools, reads
 * calls back and constrains them:
 * - `hermes`: Qwen 2.5/3 (and the fallback for templates without tools): the template lists
 *   tools in <tools></tools>; the model answers `<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>`,
 *   one block per call (parallel calls: several blocks); results come back as <tool_response>.
 * - `llama3`: Llama 3.1's JSON tool calling (its model card's "JSON based tool calling"): tools
 *   in the system turn, the reply is `{"name": ..., "parameters": {...}}`, results in an
 *   `ipython` turn. Llama 3.0 templates have no tools: the gateway writes that prompt itself.
 * - `mistral`: Mistral v0.3 / Nemo / Small (their templates and tekken/v3 tokenizers carry the
 *   control tokens): tools in `[AVAILABLE_TOOLS]`, the reply `[TOOL_CALLS] [{"name": ...,
 *   "arguments": {...}}, ...]` (parallel calls: one array), results in `[TOOL_RESULTS]`.
 */
export type ToolFamily = 'hermes' | 'llama3' | 'mistral'

/** Mistral's tool-call control token (a special token of its v3 and tekken tokenizers). */
export const MISTRAL_CALLS = '[TOOL_CALLS]'

export interface ToolDefinition {
  readonly type: 'function'
  readonly function: {
    readonly name: string
    readonly description?: string
    readonly parameters?: object
    readonly strict?: boolean
  }
}

export interface ParsedCall {
  readonly id: string
  readonly name: string
  /** The arguments as JSON text (OpenAI's function.arguments is a string). */
  readonly arguments: string
}

export const newCallId = (): string => `call_${randomBytes(12).toString('base64url')}`

/**
 * Mistral's templates refuse a tool call id that is not 9 letters or digits (its v0.3 template
 * raises "Tool call IDs should be alphanumeric strings with length 9!"): ids sent back are
 * mapped the same way for the call and its result, so an OpenAI-style `call_…` id renders.
 */
export const mistralCallId = (id: string): string =>
  id
    .replace(/[^A-Za-z0-9]/g, '')
    .slice(-9)
    .padStart(9, '0')

export function toolFamily(chat: ChatFormatter): ToolFamily {
  const src = chat.source ?? ''
  if (src.includes('<tool_call>')) return 'hermes'
  if (src.includes(MISTRAL_CALLS) || src.includes('[AVAILABLE_TOOLS]')) return 'mistral'
  if (src.includes('<|start_header_id|>')) return 'llama3'
  return 'hermes'
}

/** The template renders `tools` and tool turns itself (Qwen's, Llama 3.1's); else the gateway writes them. */
const templateHasTools = (chat: ChatFormatter): boolean => /\btools\b/.test(chat.source ?? '')

const HERMES_SYSTEM = (tools: readonly ToolDefinition[]): string =>
  '# Tools\n\nYou may call one or more functions to assist with the user query.\n\n' +
  'You are provided with function signatures within <tools></tools> XML tags:\n<tools>' +
  tools.map((t) => `\n${JSON.stringify(t)}`).join('') +
  '\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n' +
  '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'

const LLAMA3_SYSTEM = (tools: readonly ToolDefinition[]): string =>
  'Given the following functions, please respond with a JSON for a function call with its proper arguments that best answers the given prompt.\n\n' +
  'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}. Do not use variables.\n\n' +
  tools.map((t) => JSON.stringify(t)).join('\n\n')

const MISTRAL_SYSTEM = (tools: readonly ToolDefinition[]): string =>
  `[AVAILABLE_TOOLS] ${JSON.stringify(tools)}[/AVAILABLE_TOOLS]\n` +
  'To call functions, answer `[TOOL_CALLS] [{"name": <function-name>, "arguments": <args-json-object>}]`.'

const argsObject = (a: unknown): unknown => {
  if (typeof a !== 'string') return a
  try {
    return JSON.parse(a)
  } catch {
    return a
  }
}

/** A call as the family writes it (the text the model is asked to produce). */
export function writeCall(family: ToolFamily, name: string, args: unknown): string {
  const json = JSON.stringify(argsObject(args))
  if (family === 'mistral') return `${MISTRAL_CALLS} [{"name": ${JSON.stringify(name)}, "arguments": ${json}}]`
  return family === 'llama3'
    ? `{"name": ${JSON.stringify(name)}, "parameters": ${json}}`
    : `<tool_call>\n{"name": ${JSON.stringify(name)}, "arguments": ${json}}\n</tool_call>`
}

/** The prompt for a conversation with tools (none: no tools in the prompt). */
export function renderWithTools(chat: ChatFormatter, messages: readonly ChatMessage[], tools: readonly ToolDefinition[]): string {
  if (templateHasTools(chat)) {
    const id = toolFamily(chat) === 'mistral' ? mistralCallId : (x: string) => x
    const ms = messages.map((m) =>
      m.tool_calls
        ? {
            ...m,
            tool_calls: m.tool_calls.map((c) => ({
              ...c,
              id: id(c.id),
              function: { ...c.function, arguments: argsObject(c.function.arguments) }
            }))
          }
        : m.tool_call_id !== undefined
          ? { ...m, tool_call_id: id(m.tool_call_id) }
          : m
    )
    return chat.render(ms, tools)
  }
  if (tools.length === 0) return chat.render(messages.map((m) => flatten(chat, m)))
  const family = toolFamily(chat)
  const system = family === 'llama3' ? LLAMA3_SYSTEM(tools) : family === 'mistral' ? MISTRAL_SYSTEM(tools) : HERMES_SYSTEM(tools)
  const rest = messages.map((m) => flatten(chat, m))
  const first = rest[0]
  const head: ChatMessage[] =
    first?.role === 'system' || first?.role === 'developer'
      ? [{ role: 'system', content: `${first.content}\n\n${system}` }]
      : [{ role: 'system', content: system }, ...(first ? [first] : [])]
  return chat.render([...head, ...rest.slice(1)])
}

/** A tool turn or an assistant's calls as plain text, for templates that know no tools. */
function flatten(chat: ChatFormatter, m: ChatMessage): ChatMessage {
  const family = toolFamily(chat)
  if (m.role === 'assistant' && m.tool_calls?.length) {
    const calls = m.tool_calls.map((c) => writeCall(family, c.function.name, c.function.arguments))
    return { role: 'assistant', content: [m.content, ...calls].filter((x) => x).join('\n') }
  }
  if (m.role === 'tool') {
    if (family === 'llama3') return { role: 'ipython', content: m.content }
    if (family === 'mistral')
      return { role: 'user', content: `[TOOL_RESULTS] ${JSON.stringify({ content: m.content })}[/TOOL_RESULTS]` }
    return { role: 'user', content: `<tool_response>\n${m.content}\n</tool_response>` }
  }
  return { role: m.role, content: m.content }
}

/**
 * The grammar of one call to one of `tools` (tool_choice required, or the named one): the family's
 * wrapper, the function's name, then arguments that match its parameters schema.
 */
export function callGrammar(family: ToolFamily, tools: readonly ToolDefinition[]): GrammarNode {
  const enc = new TextEncoder()
  const key = family === 'llama3' ? 'parameters' : 'arguments'
  const head = {
    k: 'lit' as const,
    options: tools.map((t) => enc.encode(`{"name": ${JSON.stringify(t.function.name)}, "${key}": `)),
    next: tools.map((t) => compileSchema(t.function.parameters ?? { type: 'object' }))
  }
  if (family === 'mistral') return { k: 'seq', parts: [literal(`${MISTRAL_CALLS} [`), head, literal('}]')] }
  return family === 'llama3'
    ? { k: 'seq', parts: [head, literal('}')] }
    : { k: 'seq', parts: [literal('<tool_call>\n'), head, literal('}\n</tool_call>')] }
}

/** Calls in a completion, and the text around them (null when there is none). */
export function parseToolCalls(family: ToolFamily, text: string): { content: string | null; calls: ParsedCall[] } {
  const calls: ParsedCall[] = []
  const take = (json: string): boolean => {
    try {
      const o = JSON.parse(json) as { name?: unknown; arguments?: unknown; parameters?: unknown }
      if (typeof o?.name !== 'string') return false
      const args = o.arguments ?? o.parameters ?? {}
      calls.push({ id: newCallId(), name: o.name, arguments: typeof args === 'string' ? args : JSON.stringify(args) })
      return true
    } catch {
      return false
    }
  }
  if (family === 'mistral') return parseMistral(text, take, calls)
  if (family === 'llama3') {
    const body = text.replace('<|python_tag|>', '').trim()
    if (body.startsWith('{') && topLevelParts(body).every((part) => part === '' || take(part)) && calls.length > 0)
      return { content: null, calls }
    calls.length = 0
    return { content: text, calls }
  }
  const rest = text.replace(/<tool_call>\s*([\s\S]*?)\s*(?:<\/tool_call>|$)/g, (whole, json: string) => (take(json) ? '' : whole))
  const content = rest.trim()
  return { content: calls.length > 0 && content === '' ? null : calls.length > 0 ? content : text, calls }
}

/**
 * Mistral: content, then `[TOOL_CALLS]` and a JSON array of calls (a lone object is read too). If
 * what follows the marker does not parse, the whole text stays content (a half call is no call).
 */
function parseMistral(
  text: string,
  take: (json: string) => boolean,
  calls: ParsedCall[]
): { content: string | null; calls: ParsedCall[] } {
  const at = text.indexOf(MISTRAL_CALLS)
  if (at < 0) return { content: text, calls }
  const body = text.slice(at + MISTRAL_CALLS.length).trim()
  let items: unknown[] = []
  try {
    const v = JSON.parse(body) as unknown
    items = Array.isArray(v) ? v : [v]
  } catch {
    return { content: text, calls }
  }
  if (items.length === 0 || !items.every((item) => take(JSON.stringify(item)))) {
    calls.length = 0
    return { content: text, calls }
  }
  const content = text.slice(0, at).trim()
  return { content: content === '' ? null : content, calls }
}

/**
 * Llama 3.1 separates parallel calls with `;` (or new lines): split there, but only between
 * top-level JSON values, never inside a string or an object (an argument may hold a `;`).
 */
function topLevelParts(body: string): string[] {
  const parts: string[] = []
  let depth = 0
  let inString = false
  let escaped = false
  let from = 0
  for (let i = 0; i < body.length; i++) {
    const c = body[i]
    if (inString) {
      if (escaped) escaped = false
      else if (c === '\\') escaped = true
      else if (c === '"') inString = false
    } else if (c === '"') inString = true
    else if (c === '{' || c === '[') depth++
    else if (c === '}' || c === ']') depth--
    else if (depth === 0 && (c === ';' || c === '\n')) {
      parts.push(body.slice(from, i).trim())
      from = i + 1
    }
  }
  parts.push(body.slice(from).trim())
  return parts
}
