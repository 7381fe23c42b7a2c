import type { GgufValue, Tokenizer } from '../../shards/index.js'
import { createChatFormatter } from '../gateway/chat-template.js'

/**
 * `generate --chat`: the prompt as one user turn through the model's own chat template (GGUF
 * `tokenizer.chat_template`, rendered as the gateway does), ending where the assistant's reply
 * starts. `special` says the text carries control tokens the template wrote (`<|eot_id|>`,
 * `<|im_start|>`), which the tokenizer must read as tokens. Without a template: the plain format.
 */
export function chatPrompt(
  metadata: ReadonlyMap<string, GgufValue>,
  tokenizer: Tokenizer,
  userText: string
): { prompt: string; special: boolean; template: (text: string) => string } {
  const source = metadata.get('tokenizer.chat_template')
  const chat = createChatFormatter({
    template: typeof source === 'string' ? source : undefined,
    bosToken: tokenizer.pieceOf(tokenizer.bosId),
    eosToken: tokenizer.pieceOf(tokenizer.eosId),
    addsBos: tokenizer.encode('').length > 0
  })
  // `template`: the same format for any user text (secret canaries go through it: client/verification/canaries/canary-template.ts)
  const template = (text: string): string => chat.render([{ role: 'user', content: text }])
  return { prompt: template(userText), special: chat.kind === 'template', template }
}
