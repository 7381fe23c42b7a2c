import { Template } from '@huggingface/jinja'
import { invalidRequest } from './errors.js'

export interface ChatMessage {
  readonly role: 'system' | 'user' | 'assistant' | 'developer' | 'tool' | 'ipython'
  readonly content: string
  /** An assistant turn's tool calls, as chat templates read them (function.arguments an object). */
  readonly tool_calls?: ReadonlyArray<{ id: string; type: 'function'; function: { name: string; arguments: unknown } }>
  /** A tool result: the call it answers, and the function's name. */
  readonly tool_call_id?: string
  readonly name?: string
}

/**
 * The plain chat format, for models whose GGUF has no `tokenizer.chat_template` (the bundled
 * stories260K among them):
 *
 *     System: {system text}
 *
 *     User: {user text}
 *
 *     Assistant: {assistant text}
 *
 *     User: {user text}
 *
 *     Assistant:
 *
 * Turns are separated by a blank line; `developer` messages count as `System`, `tool` messages
 * as `Tool`. The completion stops at `PLAIN_STOP` (the start of the next user turn) as well as
 * at the request's own stop sequences.
 */
export const PLAIN_STOP = '\n\nUser:'

const PLAIN_ROLE: Record<ChatMessage['role'], string> = {
  system: 'System',
  developer: 'System',
  user: 'User',
  assistant: 'Assistant',
  tool: 'Tool',
  ipython: 'Tool'
}

export interface ChatFormatter {
  /** `template` when the model brings its own Jinja template, `plain` otherwise. */
  readonly kind: 'template' | 'plain'
  /** The prompt text for these messages, ending where the assistant's reply starts (`tools`: OpenAI tool definitions). */
  render(messages: readonly ChatMessage[], tools?: readonly unknown[]): string
  /** The Jinja source, when the model brings one (tool formats: node/gateway/tools/tools-format.ts). */
  readonly source?: string
  /** Stop sequences the format itself needs. */
  readonly stops: readonly string[]
}

export interface ChatFormatterInit {
  /** GGUF `tokenizer.chat_template`, if any. */
  readonly template?: string
  readonly bosToken: string
  readonly eosToken: string
  /** The tokenizer starts every prompt with BOS (GGUF add_bos_token; default true). */
  readonly addsBos?: boolean
}

export function createChatFormatter(init: ChatFormatterInit): ChatFormatter {
  if (!init.template) {
    return {
      kind: 'plain',
      stops: [PLAIN_STOP],
      render(messages) {
        const turns = messages.map((m) => `${PLAIN_ROLE[m.role]}: ${m.content.trim()}`)
        return `${turns.join('\n\n')}\n\nAssistant:`
      }
    }
  }
  const template = new Template(init.template)
  return {
    kind: 'template',
    source: init.template,
    // The model's end-of-turn token already ends generation (it is among the tokenizer's stop ids).
    stops: [],
    render(messages, tools) {
      let text: string
      try {
        text = template.render({
          messages: messages.map((m) => ({ ...m })),
          ...(tools && tools.length > 0 ? { tools } : {}),
          bos_token: init.bosToken,
          eos_token: init.eosToken,
          add_generation_prompt: true
        })
      } catch (err) {
        // Templates raise on conversations they do not allow (e.g. roles not alternating).
        throw invalidRequest(`The model's chat template rejected these messages: ${(err as Error).message}`, 'messages')
      }
      // The tokenizer adds BOS itself; a template that writes it too would double it.
      const strip = (init.addsBos ?? true) && init.bosToken && text.startsWith(init.bosToken)
      return strip ? text.slice(init.bosToken.length) : text
    }
  }
}
