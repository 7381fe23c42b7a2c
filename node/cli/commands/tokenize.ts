import type { Command } from 'commander'
import { createTokenizer, openModelFile, TokenizerMismatchError } from '../../../shards/index.js'
import { defaultModelPath } from '../../paths.js'

export interface TokenizeOptions {
  readonly model: string
  /** llama2.c .bin models: their tokenizer.bin. */
  readonly tokenizer?: string
  readonly text: string
  /** Read control tokens written as text (`<|eot_id|>`) as tokens (llama.cpp --parse-special). */
  readonly special: boolean
  /** Start with BOS; default: as the file says (tokenizer.ggml.add_bos_token). */
  readonly bos?: boolean
}

export interface TokenizeResult {
  readonly model: string
  /** GGUF tokenizer.ggml.model: llama (SentencePiece) or gpt2 (byte-level BPE). */
  readonly kind: 'llama' | 'gpt2'
  readonly pre?: string
  readonly ids: number[]
  /** Each token's text (control and user-defined tokens as written; byte tokens `<0xNN>` for SentencePiece). */
  readonly pieces: string[]
}

/** Tokens of `text` with the model's own tokenizer, as the client encodes a prompt. */
export function runTokenize(o: TokenizeOptions): TokenizeResult {
  const model = openModelFile(o.model, o.tokenizer !== undefined ? { tokenizerPath: o.tokenizer } : {})
  try {
    const vocab = model.vocabulary
    if (!vocab)
      throw new TokenizerMismatchError(`${o.model} holds no tokenizer; pass --tokenizer PATH (a llama2.c tokenizer.bin)`)
    const tokenizer = createTokenizer(vocab)
    const ids = tokenizer.encode(o.text, { special: o.special, ...(o.bos !== undefined ? { bos: o.bos } : {}) })
    return {
      model: o.model,
      kind: tokenizer.kind,
      ...(vocab.pre !== undefined ? { pre: vocab.pre } : {}),
      ids,
      pieces: ids.map((id) => tokenizer.pieceOf(id))
    }
  } finally {
    model.close()
  }
}

/** `layerswarm tokenize`: ids and pieces of a text. */
export function registerTokenize(program: Command): void {
  program
    .command('tokenize')
    .description("Print the token ids and pieces of a text under a model's tokenizer.")
    .option('--model <path>', 'model file (default: the bundled stories260K.gguf)')
    .option('--tokenizer <path>', 'tokenizer for llama2.c .bin models')
    .requiredOption('--text <text>', 'the text to tokenize')
    .option('--special', 'read control tokens written as text (<|eot_id|>, <|im_start|>) as tokens', false)
    .option('--no-bos', 'do not start with BOS even if the model adds it')
    .option('--json', 'print one JSON object', false)
    .action((opts) => {
      const r = runTokenize({
        model: opts.model ?? defaultModelPath(),
        tokenizer: opts.tokenizer,
        text: opts.text,
        special: opts.special,
        ...(opts.bos === false ? { bos: false } : {})
      })
      if (opts.json) {
        process.stdout.write(`${JSON.stringify(r)}\n`)
        return
      }
      const lines = r.ids.map((id, i) => `${String(id).padStart(7)}  ${JSON.stringify(r.pieces[i])}`)
      process.stdout.write(
        `${lines.join('\n')}\n${r.ids.length} token${r.ids.length === 1 ? '' : 's'} (${r.kind}${r.pre ? `, pre ${r.pre}` : ''})\n`
      )
    })
}
