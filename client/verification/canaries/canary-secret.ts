import { createHmac, randomBytes } from 'node:crypto'
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { dirname } from 'node:path'
import {
  CanaryBankMismatchError,
  type CanaryTraces,
  createRandom,
  loadBlockShards,
  type Random,
  runNow
} from '../../../canary/index.js'
import {
  createEdge,
  createReferenceKernels,
  createSampler,
  createTokenizer,
  type Edge,
  type Kernels,
  type ModelFile,
  type Tokenizer
} from '../../../shards/index.js'
import { InvalidCanarySecretError } from '../../errors.js'
import { DEFAULT_CANARY_PROMPT_TEMPERATURE } from '../../options.js'
import { CanaryMaterial } from '../canary-decoys.js'
import type { CanaryOptions } from '../canary-types.js'
import { secretSetStore } from './canary-set-store.js'

/** Bytes of a client's canary secret. */
export const CANARY_SECRET_BYTES = 32

/**
 * The client's canary secret, kept in `path` (hex, owner-only: mode 0600 in a 0700 folder); made
 * with the OS's CSPRNG the first time. It never leaves the client: every canary input is derived
 * from it, so a peer that knows the code and the model cannot regenerate them (issue 16).
 */
export function loadOrCreateSecret(path: string): Uint8Array {
  if (existsSync(path)) {
    const text = readFileSync(path, 'utf8').trim()
    if (!/^[0-9a-f]{64}$/i.test(text))
      throw new InvalidCanarySecretError(`${path} does not hold a ${CANARY_SECRET_BYTES}-byte hex secret`)
    chmodSync(path, 0o600) // a secret must not stay readable by others
    return new Uint8Array(Buffer.from(text, 'hex'))
  }
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 })
  const secret = new Uint8Array(randomBytes(CANARY_SECRET_BYTES))
  writeFileSync(path, `${Buffer.from(secret).toString('hex')}\n`, { mode: 0o600, flag: 'wx' })
  return secret
}

/** A fresh secret for a client that keeps none (in memory only). */
export function randomSecret(): Uint8Array {
  return new Uint8Array(randomBytes(CANARY_SECRET_BYTES))
}

/**
 * A seed derived from the secret for one use (`label`): HMAC-SHA256 truncated to 40 bits, which
 * fits the canary code's safe-integer seeds (buildCanaryTraces multiplies by 1000).
 */
export function secretSeed(secret: Uint8Array, label: string): number {
  if (!(secret instanceof Uint8Array) || secret.length < 16)
    throw new InvalidCanarySecretError('a canary secret has at least 16 bytes')
  const mac = createHmac('sha256', secret).update(`layerswarm-canary:${label}`).digest()
  return mac.readUIntBE(0, 5)
}

export interface SecretPromptOptions {
  readonly count: number
  /** Make prompts `from` to `count` only (default 0): each prompt depends on the secret and its index. */
  readonly from?: number
  /** Prompt lengths in tokens are drawn uniformly from [min, max] (default 4 and 24). */
  readonly minTokens?: number
  readonly maxTokens?: number
  /** Texts to cut excerpts from (a user corpus); without it the model samples the prompts. */
  readonly corpus?: readonly string[]
  readonly kernels?: Kernels
  /** Sampling temperature of the prompts (default DEFAULT_CANARY_PROMPT_TEMPERATURE). */
  readonly temperature?: number
  /** Top-k cut of the prompts' sampling (default 0: none). */
  readonly topK?: number
  /**
   * Openings of the client's real prompts (their first tokens after BOS): a sampled prompt starts
   * with one of them, drawn at random, and the model continues it. Without them a prompt starts
   * at a random sentence opening of the model's text.
   */
  readonly openings?: readonly (readonly number[])[]
  /** Per prompt index, tokens it needs at least (a templated canary's user message, cut later). */
  readonly minTokensOf?: readonly (number | undefined)[]
  /** The client's tokenizer and edge (on `kernels`), instead of new ones (issue 31: seconds each on a 151k vocabulary). */
  readonly tokenizer?: Tokenizer
  readonly edge?: Edge
}

let promptCounter = 0

/**
 * Canary prompts only the secret's holder can regenerate, from the same distribution as real
 * prompts: excerpts of the user's corpus (from a text's start to a sentence end), or text the
 * model samples (temperature 1.2, from BOS and one of the client's real prompts' openings, or else
 * from a random sentence opening of the model's text), of a random length, to a sentence end.
 */
export function secretPrompts(model: ModelFile, secret: Uint8Array, o: SecretPromptOptions): string[] {
  return runNow(secretPromptsJob(model, secret, o))
}

/** secretPrompts as a sliced job (a slice per lockstep step): canary/background-job.ts runs it between real steps. */
export function* secretPromptsJob(model: ModelFile, secret: Uint8Array, o: SecretPromptOptions): Generator<void, string[]> {
  const rnd = createRandom(secretSeed(secret, 'prompts'))
  const min = o.minTokens ?? 4
  const max = Math.max(min, o.maxTokens ?? 24)
  const length = (): number => min + rnd.int(max - min + 1)
  const from = o.from ?? 0
  if (!(Number.isInteger(from) && from >= 0 && from <= o.count))
    throw new InvalidCanarySecretError(`prompts from ${from} to ${o.count}: from must be an integer in [0, count]`)
  if (o.corpus && o.corpus.length > 0) return corpusExcerpts(o.corpus, rnd, o.count, length).slice(from)
  if (!model.vocabulary) throw new InvalidCanarySecretError(`${model.path} holds no tokenizer to sample canary prompts with`)
  const tokenizer = o.tokenizer ?? createTokenizer(model.vocabulary)
  const kernels = o.kernels ?? createReferenceKernels()
  const edge = o.edge ?? createEdge({ model, kernels })
  // a block per slice (canary/trace.ts), so a background build never loads the whole model at once
  const shards = yield* loadBlockShards(model, kernels, [])
  const stops = new Set([tokenizer.bosId, tokenizer.eosId, ...tokenizer.stopIds])
  // All prompts sampled in lockstep: each step of every prompt still going runs the blocks as
  // one batch (Shard.forwardBatch) and the LM head as one matmul, so each weight is read once
  // per step for all of them; a batched row is computed as that row alone, so the tokens are
  // those of sampling each prompt by itself.
  // The draws of sampling one prompt after another, in that order: each prompt's length, then
  // its start (Random.int takes one uniform draw whatever its range).
  const all = Array.from({ length: o.count }, (_, i) => {
    // one draw whatever the minimum, so later prompts' draws stay where they were
    const len = Math.max(length(), Math.min(model.config.seqLen - 1, o.minTokensOf?.[i] ?? 0))
    const startDraw = rnd.next()
    // Sampled well past the prompt's length, so it can start at a later sentence: real prompts
    // open a sentence, and a peer holding block 0 scores the first token after BOS (a cut in
    // mid-sentence was told from real prompts at AUROC 0.77: test/canary/indistinguishable-content).
    const total = Math.min(model.config.seqLen - 1, len + 48)
    const opening = o.openings && o.openings.length > 0 ? o.openings[Math.floor(startDraw * o.openings.length)] : undefined
    return {
      opening,
      id: `canary-prompt-${++promptCounter}`,
      len,
      startDraw,
      total,
      sampler: createSampler({
        temperature: o.temperature ?? DEFAULT_CANARY_PROMPT_TEMPERATURE,
        topK: o.topK ?? 0,
        seed: secretSeed(secret, `prompt-${i}`)
      }),
      tokens: [tokenizer.bosId, ...(opening ?? [])],
      input: [tokenizer.bosId, ...(opening ?? [])],
      pos: 0
    }
  })
  // the draws of the prompts before `from` are taken all the same: prompt i's are the same whatever `from`
  const runs = all.slice(from)
  const { dim, vocabSize } = model.config
  try {
    for (const r of runs) for (const shard of shards) shard.openSession(r.id, { maxLength: r.total + 1 })
    let going = runs.filter((r) => r.tokens.length <= r.total)
    while (going.length > 0) {
      let hs = going.map((r) => edge.embed(r.input))
      for (const shard of shards) {
        hs = shard.forwardBatch(going.map((r, g) => ({ id: r.id, hidden: hs[g], startPos: r.pos })))
        yield
      }
      const last = new Float32Array(going.length * dim)
      for (const [g, r] of going.entries()) last.set(hs[g].subarray((r.input.length - 1) * dim), g * dim)
      const logits = edge.logits(last, going.length)
      going.forEach((r, g) => {
        const row = logits.subarray(g * vocabSize, (g + 1) * vocabSize)
        for (const s of stops) if (s >= 0 && s < vocabSize) row[s] = Number.NEGATIVE_INFINITY
        const next = r.sampler.sample(row, r.tokens)
        r.pos += r.input.length
        r.tokens.push(next)
        r.input = [next]
      })
      going = going.filter((r) => r.tokens.length <= r.total)
      yield
    }
  } finally {
    for (const shard of shards) {
      for (const r of runs) shard.closeSession(r.id)
      shard.close()
    }
  }
  const out: string[] = []
  for (const { tokens, len, startDraw, opening } of runs) {
    // a random start among the sentence openings (the text's first token, or one after . ! ?)
    const starts = [1]
    for (let k = 2; k + len <= tokens.length; k++) if (/[.!?]["']?\s*$/.test(tokenizer.decode([tokens[k - 1]]))) starts.push(k)
    const skip = opening ? 0 : starts[Math.floor(startDraw * starts.length)] - 1
    // ... to the end of the sentence the length reaches: real prompts end a sentence, and a
    // decoy's prefill (cut at a sentence end of the canary) then holds only text sampled here
    let end = Math.min(tokens.length, 1 + skip + len)
    while (end < tokens.length && !/[.!?]["']?\s*$/.test(tokenizer.decode([tokens[end - 1]]))) end++
    const text = tokenizer.decode(tokens.slice(1 + skip, end)).trim()
    out.push(text.length > 0 ? text : tokenizer.decode(tokens.slice(1)).trim() || 'a')
  }
  return out
}

function corpusExcerpts(corpus: readonly string[], rnd: Random, count: number, length: () => number): string[] {
  const texts = corpus.map((t) => t.split(/\s+/).filter(Boolean)).filter((w) => w.length > 0)
  if (texts.length === 0) throw new InvalidCanarySecretError('the canary corpus holds no words')
  const out: string[] = []
  for (let i = 0; i < count; i++) {
    const words = texts[rnd.int(texts.length)]
    // from the text's start (each text is an example of a prompt: real prompts open a story,
    // a later sentence often opens on a pronoun), then a random length
    const start = 0
    let n = Math.min(words.length - start, Math.max(1, Math.round(length() * 0.75))) // ~4 tokens per 3 words
    // ... to the end of that sentence: a real prompt's prefill is whole sentences, and a decoy's
    // prefill (as long as a real one) should not run on into the model's continuation
    while (start + n < words.length && !/[.!?]["']?$/.test(words[start + n - 1])) n++
    out.push(words.slice(start, start + n).join(' '))
  }
  return out
}

/**
 * A client's canary material and mixing draws. Public canaries only when a seed is given (tests,
 * benchmarks); otherwise every canary input, its prompts, sampling and the mixing draws derive
 * from the secret (given, kept in `secretFile`, or made for this client in memory).
 */
export function secretMaterial(
  model: ModelFile,
  modelId: string,
  options: CanaryOptions & {
    maxLength: number
    kernels?: Kernels
    log?: (e: Record<string, unknown>) => void
    bank?: CanaryTraces
    onBuild?: (boundary: number, built: number, total: number) => void
    /** Grow the set in slices between real steps (CanaryTraceStoreOptions.inSlices). */
    inSlices?: boolean
    onBuildError?: (err: Error) => void
    /** The client's tokenizer and edge: every build shares them (issue 31). */
    tokenizer?: Tokenizer
    edge?: Edge
  }
): { material: CanaryMaterial; random: Random } {
  const secret =
    options.seed !== undefined && !options.secret && !options.secretFile
      ? undefined
      : (options.secret ?? (options.secretFile ? loadOrCreateSecret(options.secretFile) : randomSecret()))
  const seed = secret ? secretSeed(secret, 'traces') : options.seed
  const random = createRandom(secret ? secretSeed(secret, 'mixing') : (options.seed ?? Date.now()))
  if (options.bank && options.bank.modelId !== modelId) {
    throw new CanaryBankMismatchError(`the canary bank was built for model ${options.bank.modelId}, not ${modelId}`)
  }
  const shared = {
    ...(options.tokenizer ? { tokenizer: options.tokenizer } : {}),
    ...(options.edge ? { edge: options.edge } : {})
  }
  const material = new CanaryMaterial(model, {
    bank: options.bank,
    kernels: options.kernels,
    prompts: options.prompts,
    promptsFrom: secret
      ? (count, more) =>
          secretPrompts(model, secret, {
            count,
            from: more.from,
            openings: more.openings,
            minTokensOf: more.minTokensOf,
            corpus: options.corpus,
            kernels: options.kernels,
            temperature: options.promptTemperature,
            ...shared
          })
      : undefined,
    promptsJob: secret
      ? (count, more) =>
          secretPromptsJob(model, secret, {
            count,
            from: more.from,
            openings: more.openings,
            minTokensOf: more.minTokensOf,
            corpus: options.corpus,
            kernels: options.kernels,
            temperature: options.promptTemperature,
            ...shared
          })
      : undefined,
    ...shared,
    firstAtOnceMacs: options.firstAtOnceMacs,
    // a kept secret keeps its built set too (beside it, sealed under a key derived from it)
    saved:
      secret && options.secretFile && options.keepSet !== false
        ? secretSetStore(dirname(options.secretFile), secret, modelId, options.log)
        : undefined,
    count: options.count ?? 8,
    onSpent: (peerId, canaries) => options.log?.({ event: 'canaries-spent', peerId, canaries }),
    seed,
    length: options.length,
    maxLength: options.maxLength,
    onBuild: options.onBuild,
    inSlices: options.inSlices,
    onBuildError: options.onBuildError
  })
  return { material, random }
}
