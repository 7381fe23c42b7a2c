/*
 * Issue 33 item 4 (measured, not built): what a thin client would fetch of the embeddings if it
 * fetched only the rows of the tokens it uses. Rows are checked only as whole 1 MiB chunks (the
 * manifest hashes chunks), so a token costs its chunk: for the 8B Q4_K_M shape 2,304-byte rows,
 * about 455 rows a chunk. Texts: this repository's docs/*.md tokenized with Llama 3's vocabulary,
 * cut into exchanges of `promptTokens + generatedTokens` consecutive tokens (one request), and
 * the chunks their rows touch counted per exchange and over many (a long-lived client or gateway).
 */
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { packageTokenizer } from '../shards/tokenizers/vocab-packages.js'

const CHUNK_BYTES = 1 << 20

export function embeddingRowsShare(
  embeddingBytes: number,
  vocabSize: number,
  { docsDir = join(process.cwd(), 'docs'), promptTokens = 100, generatedTokens = 256 } = {}
) {
  const tk = packageTokenizer('llama3')
  if (tk.vocabSize !== vocabSize) throw new Error(`llama3 vocabulary has ${tk.vocabSize} tokens, the shape ${vocabSize}`)
  const rowBytes = embeddingBytes / vocabSize
  const totalChunks = Math.ceil(embeddingBytes / CHUNK_BYTES)
  const chunksOf = (row: number): number[] => {
    const first = Math.floor((row * rowBytes) / CHUNK_BYTES)
    const last = Math.floor(((row + 1) * rowBytes - 1) / CHUNK_BYTES)
    return first === last ? [first] : [first, last]
  }
  const tokens: number[] = []
  for (const f of readdirSync(docsDir)
    .filter((n) => n.endsWith('.md'))
    .sort())
    tokens.push(...tk.encode(readFileSync(join(docsDir, f), 'utf8')))
  const per = promptTokens + generatedTokens
  const exchanges: number[] = []
  const seen = new Set<number>()
  const cumulative: Record<string, number> = {}
  for (let i = 0; i + per <= tokens.length; i += per) {
    const chunks = new Set<number>()
    for (const t of tokens.slice(i, i + per)) for (const c of chunksOf(t)) chunks.add(c)
    exchanges.push(chunks.size)
    for (const c of chunks) seen.add(c)
    const n = exchanges.length
    if (n === 1 || n === 10 || n === 100 || n === 1000) cumulative[`after${n}`] = seen.size / totalChunks
  }
  const sorted = [...exchanges].sort((a, b) => a - b)
  const mean = exchanges.reduce((s, x) => s + x, 0) / exchanges.length
  return {
    texts: 'docs/*.md, Llama 3 vocabulary',
    tokens: tokens.length,
    tokensPerExchange: per,
    exchanges: exchanges.length,
    rowBytes,
    rowsPerChunk: CHUNK_BYTES / rowBytes,
    embeddingChunks: totalChunks,
    chunksPerExchange: { mean, p50: sorted[sorted.length >> 1], max: sorted[sorted.length - 1] },
    shareOfEmbeddingsPerExchange: mean / totalChunks,
    bytesPerExchange: Math.min(embeddingBytes, mean * CHUNK_BYTES),
    shareOfEmbeddingsCumulative: { ...cumulative, all: seen.size / totalChunks }
  }
}
