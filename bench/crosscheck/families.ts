/**
 * `npm run crosscheck -- families [--families llama3,qwen2,qwen3] [--types F16,Q8_0,...]
 * [--seeds 9001,9002] [--tokens 16] [--threads 2] [--strings 500] [--keep]`:
 * per model family, a random-weight GGUF written by llama.cpp's own writer (gguf-py, through
 * write-family.py) with a real vocabulary, quantised by llama.cpp's llama-quantize, decodes
 * greedily to llama.cpp's own tokens from the same prompt text: `layerswarm generate
 * --temperature 0` (runLocalGenerate, the command's body) against llama-greedy (text:/chat:
 * prompts tokenized by llama.cpp). Then `layerswarm tokenize` against llama.cpp's tokenizer on
 * the hard-string corpus, for both vocabularies. Seeds default to fresh random ones (held back:
 * never seen during development; printed so a run can be repeated). Prints one JSON object.
 */
import { randomInt } from 'node:crypto'
import { mkdirSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { runLocalGenerate } from '../../node/cli/commands/generate/generate.js'
import { createTokenizer, openModelFile } from '../../shards/index.js'
import { FAMILIES, writeFamilyModel } from './family-models.js'
import { buildNativeLlamaCpp, llamaGreedy, llamaQuantize, llamaTokenize, type NativeLlamaCpp } from './llama-cpp-native.js'
import { oursGreedy } from './run.js'
import { HARD_STRINGS, tokenizerStrings } from './tokenizer-strings.js'

export const FAMILY_TYPES = ['F16', 'Q8_0', 'Q6_K', 'Q5_K_M', 'Q4_K_M', 'Q4_0']

/** Plain prompts as `generate --prompt` takes them, and one chat turn per file. */
export const FAMILY_PROMPTS: ReadonlyArray<{ text: string; chat?: boolean }> = [
  { text: 'Once upon a time, there was a little girl named' },
  { text: 'def add(a, b):\n    return a + b  # 12345 apples' },
  { text: "日本語のテキスト, café naïve 😀 — don't stop" },
  { text: '  spaces\tand\n\nnewlines <|im_end|> <|eot_id|> 3.14159' },
  { text: 'Why is the sky blue?', chat: true }
]

export interface FamilyOptions {
  families: string[]
  types: string[]
  seeds: number[]
  tokens: number
  threads: number
  strings: number
  keep: boolean
  /** Our KV cache (default generate's own, f32; f16 is llama.cpp's default cache type). */
  kvDType?: 'f16' | 'f32'
  /** Default FAMILY_PROMPTS. */
  prompts?: ReadonlyArray<{ text: string; chat?: boolean }>
  log: (line: string) => void
}

export interface GreedyRow {
  family: string
  type: string
  seed: number
  prompt: string
  chat: boolean
  promptEqual: boolean
  equal: boolean
  firstDiff: number | null
  ourMarginAtDiff: number | null
  llamaMarginAtDiff: number | null
  minLlamaMargin: number
  /** When tokens differ: whether they agree with f32 KV and no flash attention on both sides. */
  f32KvEqual: boolean | null
  ours: number[]
  llamaCpp: number[]
  error?: string
}

const r4 = (x: number) => Math.round(x * 1e4) / 1e4

async function compareOne(
  tools: NativeLlamaCpp,
  file: string,
  o: FamilyOptions,
  prompt: { text: string; chat?: boolean }
): Promise<Omit<GreedyRow, 'family' | 'type' | 'seed'>> {
  const theirs = llamaGreedy(tools, file, o.threads, o.tokens, { text: prompt.text, chat: prompt.chat })
  const ours = await ourGenerate(file, o, prompt, o.kvDType)
  const promptEqual = JSON.stringify(ours.promptTokens) === JSON.stringify(theirs.prompt)
  const firstDiff = firstDifference(ours.tokens, theirs.tokens)
  let ourMargin: number | null = null
  let f32KvEqual: boolean | null = null
  if (firstDiff !== null && firstDiff < theirs.tokens.length) {
    // Our margin at that step, from llama.cpp's prompt ids (our tokens equal its tokens before it).
    const m = await oursGreedy(file, o.threads, firstDiff + 1, theirs.prompt)
    ourMargin = r4(m.margins[firstDiff])
    // Both engines again with an f32 KV cache and llama.cpp without flash attention, whose f16
    // accumulation (AVX512-FP16 in a -march=native build) is the usual source of near-tie flips.
    const theirs32 = llamaGreedy(tools, file, o.threads, o.tokens, { text: prompt.text, chat: prompt.chat }, { f32Kv: true })
    const ours32 = o.kvDType === 'f32' ? ours : await ourGenerate(file, o, prompt, 'f32')
    f32KvEqual = firstDifference(ours32.tokens, theirs32.tokens) === null
  }
  return {
    prompt: prompt.text,
    chat: prompt.chat === true,
    promptEqual,
    equal: promptEqual && firstDiff === null,
    firstDiff,
    ourMarginAtDiff: ourMargin,
    llamaMarginAtDiff: firstDiff !== null && firstDiff < theirs.margins.length ? r4(theirs.margins[firstDiff]) : null,
    minLlamaMargin: r4(Math.min(...theirs.margins)),
    f32KvEqual,
    ours: ours.tokens,
    llamaCpp: theirs.tokens
  }
}

function firstDifference(a: readonly number[], b: readonly number[]): number | null {
  for (let i = 0; i < Math.max(a.length, b.length); i++) if (a[i] !== b[i]) return i
  return null
}

/** `layerswarm generate --temperature 0 --json` (the command's body) on one prompt. */
function ourGenerate(file: string, o: FamilyOptions, prompt: { text: string; chat?: boolean }, kvDType?: 'f16' | 'f32') {
  return runLocalGenerate(
    {
      model: file,
      prompt: prompt.text,
      chat: prompt.chat,
      maxTokens: o.tokens,
      temperature: 0,
      topK: 0,
      topP: 1,
      seed: 0,
      repetitionPenalty: 1,
      json: true,
      threads: o.threads,
      kvDType
    },
    () => {}
  )
}

export interface TokenizerRow {
  vocab: string
  special: boolean
  strings: number
  equal: number
  mismatches: Array<{ text: string; ours: number[]; llamaCpp: number[] }>
}

/** Our tokenizer against llama_tokenize on the same file, with and without special tokens. */
function compareTokenizer(tools: NativeLlamaCpp, file: string, vocab: string, o: FamilyOptions, work: string): TokenizerRow[] {
  const model = openModelFile(file)
  const tok = createTokenizer(model.vocabulary!)
  model.close()
  // NUL cannot pass through the driver's input; strings with one are left out.
  const strings = [...HARD_STRINGS, ...tokenizerStrings(o.strings, 15)].filter((s) => !s.includes('\0'))
  const rows: TokenizerRow[] = []
  for (const special of [false, true]) {
    const want = llamaTokenize(tools, file, strings, special, true, work)
    const mismatches: TokenizerRow['mismatches'] = []
    strings.forEach((s, i) => {
      const got = tok.encode(s, { special })
      if (JSON.stringify(got) !== JSON.stringify(want[i])) mismatches.push({ text: s, ours: got, llamaCpp: want[i] })
    })
    rows.push({
      vocab,
      special,
      strings: strings.length,
      equal: strings.length - mismatches.length,
      mismatches: mismatches.slice(0, 10)
    })
    o.log(`tokenize ${vocab} special=${special}: ${strings.length - mismatches.length}/${strings.length} equal`)
  }
  return rows
}

export async function runFamilies(
  o: FamilyOptions
): Promise<{ llamaCpp: string; greedy: GreedyRow[]; tokenizer: TokenizerRow[] }> {
  const tools = buildNativeLlamaCpp(o.log)
  const work = join(tools.dir, 'crosscheck-families')
  mkdirSync(work, { recursive: true })
  const greedy: GreedyRow[] = []
  const tokenizer: TokenizerRow[] = []
  const vocabsDone = new Set<string>()
  for (const family of o.families) {
    for (const seed of o.seeds) {
      const src = join(work, `${family}-${seed}-F16.gguf`)
      o.log(`${family} seed ${seed}: writing F16 with llama.cpp's gguf-py`)
      writeFamilyModel(tools, family, seed, src, work)
      const vocab = FAMILIES[family].vocab
      if (o.strings > 0 && !vocabsDone.has(vocab)) {
        vocabsDone.add(vocab)
        tokenizer.push(...compareTokenizer(tools, src, vocab, o, work))
      }
      for (const type of o.types) {
        const file = type === 'F16' ? src : join(work, `${family}-${seed}-${type}.gguf`)
        try {
          if (type !== 'F16') llamaQuantize(tools, src, file, type)
          for (const prompt of o.prompts ?? FAMILY_PROMPTS) {
            const row = { family, type, seed, ...(await compareOne(tools, file, o, prompt)) }
            greedy.push(row)
            o.log(
              `${family} ${type} seed ${seed} ${prompt.chat ? 'chat' : 'text'} ${JSON.stringify(prompt.text.slice(0, 20))}: ` +
                (row.equal
                  ? `equal (${row.ours.length} tokens)`
                  : `${row.promptEqual ? '' : 'PROMPT DIFFERS; '}first diff at ${row.firstDiff} (margins ours ${row.ourMarginAtDiff}, llama.cpp ${row.llamaMarginAtDiff}; with f32 KV ${row.f32KvEqual ? 'equal' : 'still different'})`)
            )
          }
        } catch (e) {
          const error = e instanceof Error ? e.message.slice(0, 400) : String(e)
          greedy.push({ family, type, seed, error } as GreedyRow)
          o.log(`${family} ${type}: ${error.split('\n')[0]}`)
        } finally {
          if (!o.keep && type !== 'F16') rmSync(file, { force: true })
        }
      }
      if (!o.keep) rmSync(src, { force: true })
    }
  }
  return { llamaCpp: tools.tag, greedy, tokenizer }
}

export async function main(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      families: { type: 'string', default: Object.keys(FAMILIES).join(',') },
      types: { type: 'string', default: FAMILY_TYPES.join(',') },
      seeds: { type: 'string' },
      tokens: { type: 'string', default: '16' },
      threads: { type: 'string', default: '2' },
      strings: { type: 'string', default: '500' },
      keep: { type: 'boolean', default: false },
      'kv-dtype': { type: 'string', default: 'f32' }
    }
  })
  const heldBack = values.seeds === undefined
  const seeds = heldBack ? [randomInt(10_000, 1_000_000)] : values.seeds!.split(',').map(Number)
  const log = (line: string) => process.stderr.write(`crosscheck families: ${line}\n`)
  const o: FamilyOptions = {
    families: values.families.split(','),
    types: values.types.split(','),
    seeds,
    tokens: Number(values.tokens),
    threads: Number(values.threads),
    strings: Number(values.strings),
    keep: values.keep,
    kvDType: values['kv-dtype'] === 'f16' ? 'f16' : 'f32',
    log
  }
  const r = await runFamilies(o)
  const ok = r.greedy.filter((g) => g.equal).length
  console.log(
    JSON.stringify(
      {
        bench: 'crosscheck-families',
        llamaCpp: r.llamaCpp,
        seeds,
        heldBack,
        tokens: o.tokens,
        summary: { greedyEqual: ok, greedyRuns: r.greedy.length, tokenizer: r.tokenizer.map(({ mismatches, ...t }) => t) },
        greedy: r.greedy,
        tokenizer: r.tokenizer
      },
      null,
      2
    )
  )
}
