import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { Tokenizer as HfTokenizer } from '@huggingface/tokenizers'
import { describe, expect, it } from 'vitest'
import { chatPrompt } from '../../node/cli/chat-prompt.js'
import { createChatFormatter } from '../../node/gateway/chat-template.js'
import { ggufPlainValue } from '../../shards/formats/gguf-values.js'
import type { GgufValue } from '../../shards/model/model-file.js'
import { createTokenizer } from '../../shards/tokenizers/tokenizer.js'
import { vocabularyFromGguf } from '../../shards/tokenizers/tokenizer-files.js'
import { loadPackageVocabulary, VOCAB_PACKAGES } from '../../shards/tokenizers/vocab-packages.js'

// The real Llama 3 and Qwen 3 chat templates (tokenizer_config.json of the vocabulary packages,
// written into GGUF tokenizer.chat_template by make-model --vocab), rendered by the gateway's
// formatter and tokenized with their special tokens as Hugging Face tokenizes the same text.

const require = createRequire(import.meta.url)
const MESSAGES = [
  { role: 'system', content: 'Be brief.' },
  { role: 'user', content: 'What is 2+2? <|eot_id|> <|im_end|>' }
] as const

function setup(name: 'llama3' | 'qwen') {
  const v = loadPackageVocabulary(name)
  const metadata = new Map<string, GgufValue>(v.metadata.map(([k, val]) => [k, ggufPlainValue(val)]))
  const tokenizer = createTokenizer(vocabularyFromGguf(metadata, v.tokens.length))
  const pkg = VOCAB_PACKAGES[name].pkg
  const hf = new HfTokenizer(
    JSON.parse(readFileSync(require.resolve(`${pkg}/models/tokenizer.json`), 'utf8')),
    JSON.parse(readFileSync(require.resolve(`${pkg}/models/tokenizer_config.json`), 'utf8'))
  )
  return { metadata, tokenizer, hf }
}

describe('chat templates of real models', () => {
  it('Llama 3: header tokens, <|eot_id|> after each turn, one BOS', () => {
    const { metadata, tokenizer, hf } = setup('llama3')
    const chat = createChatFormatter({
      template: metadata.get('tokenizer.chat_template') as string,
      bosToken: tokenizer.pieceOf(tokenizer.bosId),
      eosToken: tokenizer.pieceOf(tokenizer.eosId),
      addsBos: true
    })
    const text = chat.render(MESSAGES)
    expect(text).toBe(
      '<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>' +
        '<|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2? <|eot_id|> <|im_end|><|eot_id|>' +
        '<|start_header_id|>assistant<|end_header_id|>\n\n'
    )
    const ids = tokenizer.encode(text, { special: true })
    expect(ids.filter((id) => id === 128000)).toEqual([128000])
    expect(ids[0]).toBe(128000)
    expect(ids.filter((id) => id === 128006).length).toBe(3) // <|start_header_id|>
    expect(ids).toEqual([128000, ...hf.encode(text, { add_special_tokens: false }).ids])
    // generate --chat does the same for one user turn.
    const one = chatPrompt(metadata, tokenizer, 'Hi')
    expect(one).toMatchObject({
      prompt: '<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n',
      special: true
    })
    // the same format for any user text: secret canaries go through it (client/verification/canaries/canary-template.ts)
    expect(one.template('Hi')).toBe(one.prompt)
  })

  it('Qwen 3: <|im_start|>/<|im_end|> turns, no BOS', () => {
    const { metadata, tokenizer, hf } = setup('qwen')
    const { prompt, special } = chatPrompt(metadata, tokenizer, 'What is 2+2?')
    expect(prompt).toBe('<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n')
    const ids = tokenizer.encode(prompt, { special })
    expect(ids[0]).toBe(151644)
    expect(ids).toContain(151645)
    expect(ids).toEqual(hf.encode(prompt, { add_special_tokens: false }).ids)
  })
})
