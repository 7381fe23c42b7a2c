// The tokenizer interfaces, apart from the implementations (tokenizer.ts, tokenizer-gpt2.ts,
// tokenizer-stream.ts) so that those import them without importing each other (issue 36: no cycles).

/**
 * SentencePiece-BPE tokenizer, token for token what llama2.c run.c `encode()`/`decode()` do
 * (llama.cpp's SPM tokenizer runs the same greedy merge). Works on any Vocabulary, whether it
 * came from a llama2.c tokenizer.bin or from GGUF metadata.
 */
export interface Tokenizer {
  /** GGUF tokenizer.ggml.model: 'llama' (SentencePiece) or 'gpt2' (byte-level BPE). */
  readonly kind: 'llama' | 'gpt2'
  readonly vocabSize: number
  readonly bosId: number
  readonly eosId: number
  readonly stopIds: readonly number[]
  encode(text: string, options?: EncodeOptions): number[]
  decode(ids: readonly number[]): string
  createDecoder(): StreamDecoder
  /**
   * The vocabulary piece of `id`, with real spaces (byte tokens read `<0xNN>`); for gpt2 the
   * text a normal token stands for, and the raw text of control and user-defined tokens.
   */
  pieceOf(id: number): string
  /** The bytes `id` decodes to (empty for control and unused tokens); constrained sampling walks them. */
  tokenBytes(id: number): Uint8Array
}

export interface EncodeOptions {
  /** Start with BOS (default: the file's add_bos_token, true when it has none). */
  readonly bos?: boolean
  /** End with EOS (default: the file's add_eos_token, false when it has none). */
  readonly eos?: boolean
  /**
   * Find control tokens written as text (`<|eot_id|>`) and emit their ids, as for a chat
   * template's output (llama.cpp parse_special). Off for user text, where they stay text.
   */
  readonly special?: boolean
}

/** Turns tokens into text as they arrive, holding back incomplete UTF-8 sequences. */
export interface StreamDecoder {
  /** Text of `id`; `prevId` is the token before it (-1 for none), for the BOS rule. */
  push(id: number, prevId: number): string
  /** Whatever is still buffered (an incomplete UTF-8 sequence decodes to U+FFFD). */
  flush(): string
}
