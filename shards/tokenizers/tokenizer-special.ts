/** GGUF token types (llama.cpp llama_token_type, = SentencePiece ModelProto.Type + UNUSED). */
export const TOKEN_TYPE = {
  normal: 1,
  unknown: 2,
  control: 3,
  userDefined: 4,
  unused: 5,
  byte: 6
} as const

/** A piece of text to tokenize, or the id of a special token found in it. */
export type Fragment = string | number

/**
 * Cuts text at special tokens, as llama.cpp's tokenizer_st_partition and Hugging Face's added-
 * token matching do: control and unknown tokens are found only when `special` is set (template
 * output, `--special`), user-defined tokens always. Leftmost match first; at one position the
 * longest token wins (the alternatives are ordered longest first).
 */
export function createSpecialSplitter(
  pieces: readonly string[],
  types: Int32Array | undefined
): (text: string, special: boolean) => Fragment[] {
  const all = new Map<string, number>()
  const userOnly = new Map<string, number>()
  if (types) {
    for (let id = 0; id < pieces.length; id++) {
      const t = types[id]
      const text = pieces[id]
      if (text.length === 0) continue
      if (t === TOKEN_TYPE.control || t === TOKEN_TYPE.unknown || t === TOKEN_TYPE.userDefined) {
        if (!all.has(text)) all.set(text, id)
        if (t === TOKEN_TYPE.userDefined && !userOnly.has(text)) userOnly.set(text, id)
      }
    }
  }
  const build = (m: Map<string, number>): RegExp | undefined => {
    if (m.size === 0) return undefined
    const alternatives = [...m.keys()].sort((a, b) => b.length - a.length).map(escapeRegExp)
    return new RegExp(alternatives.join('|'), 'gu')
  }
  const allRe = build(all)
  const userRe = build(userOnly)
  return (text, special) => {
    const pattern = special ? allRe : userRe
    const ids = special ? all : userOnly
    if (!pattern) return text.length > 0 ? [text] : []
    const out: Fragment[] = []
    let at = 0
    for (const m of text.matchAll(pattern)) {
      if (m.index > at) out.push(text.slice(at, m.index))
      out.push(ids.get(m[0]) as number)
      at = m.index + m[0].length
    }
    if (at < text.length) out.push(text.slice(at))
    return out
  }
}

function escapeRegExp(s: string): string {
  // Syntax characters only: in 'u' mode any other escape (e.g. `\-`) is a SyntaxError.
  return s.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')
}
