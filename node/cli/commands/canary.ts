import { readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { type Command, Option } from 'commander'
import { buildCanaryTraces, DEFAULT_CANARY_LENGTH, loadOrCreateBankKey, saveCanaryBank } from '../../../canary/index.js'
import { randomSecret, secretPrompts, secretSeed } from '../../../client/index.js'
import { computeModelId, createReferenceKernels, openModelFile } from '../../../shards/index.js'
import { progress } from '../../log.js'
import { int } from '../options.js'

/** Canaries in a bank by default: more than a client's own set (8), a bank is built once. */
export const DEFAULT_BANK_COUNT = 32

interface BuildOptions {
  model: string
  tokenizer?: string
  count: number
  length?: number
  out: string
  key?: string
  corpus?: string
}

/**
 * `layerswarm canary build --model F --count N --out BANK`: on a machine the user trusts, build
 * secret canaries (prompts the model samples from a fresh random secret, or cut from --corpus)
 * and their reference hidden states at every block boundary on the reference kernels, sealed with
 * AES-256-GCM under the key in --key (made on first use, 0600). A thin client given the bank and
 * the key verifies peers without holding their blocks (docs/verification.md).
 */
export function registerCanary(program: Command): void {
  const canary = program
    .command('canary')
    .description('Canary banks: secret canaries for clients that hold only their edge blocks.')
  canary
    .command('build')
    .description('Build a sealed canary bank: secret inputs and reference activations at every block boundary.')
    .requiredOption('--model <path>', 'the model file (the whole model: build on a machine you trust)')
    .option('--tokenizer <path>', 'tokenizer.bin for llama2.c models')
    .addOption(new Option('--count <n>', 'canaries in the bank').default(DEFAULT_BANK_COUNT).argParser(int('--count', 1)))
    .addOption(
      new Option('--length <n>', `positions per canary (default ${DEFAULT_CANARY_LENGTH}, capped by the context)`).argParser(
        int('--length', 2)
      )
    )
    .requiredOption('--out <path>', 'the bank file to write (mode 0600)')
    .option('--key <path>', 'the key file (hex, 0600; made when missing); default: canary-bank-key beside --out')
    .option('--corpus <file>', 'cut the canary prompts from this text (paragraphs) instead of sampling them')
    .action((opts: BuildOptions) => {
      const keyFile = opts.key ?? join(dirname(opts.out), 'canary-bank-key')
      const key = loadOrCreateBankKey(keyFile)
      const model = openModelFile(opts.model, opts.tokenizer !== undefined ? { tokenizerPath: opts.tokenizer } : {})
      try {
        const kernels = createReferenceKernels()
        // A fresh secret per bank, kept nowhere: the bank itself is the only copy of its canaries.
        const secret = randomSecret()
        const corpus = opts.corpus ? readFileSync(opts.corpus, 'utf8').split(/\n\s*\n/) : undefined
        const prompts = secretPrompts(model, secret, { count: opts.count, corpus, kernels })
        const bar = progress('canaries', opts.count, { unit: 'canaries' })
        const traces = buildCanaryTraces({
          model,
          kernels,
          prompts,
          tokensPerPrompt: Math.min(opts.length ?? DEFAULT_CANARY_LENGTH, model.config.seqLen),
          seed: secretSeed(secret, 'traces'),
          onProgress: (built) => bar.update(built)
        })
        bar.done()
        saveCanaryBank(opts.out, traces, key)
        const summary = {
          bank: opts.out,
          key: keyFile,
          modelId: computeModelId(model),
          canaries: traces.traces.length,
          positions: traces.traces[0].tokens.length,
          levels: traces.nLayers + 1
        }
        process.stdout.write(`${JSON.stringify(summary)}\n`)
      } finally {
        model.close()
      }
    })
}
