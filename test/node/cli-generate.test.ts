import { describe, expect, it } from 'vitest'
import { runCli } from '../helpers/cli.js'
import { BIN_PATH, loadReference, TOK_PATH } from '../helpers/reference.js'

const ref = loadReference('stories260K_greedy_once_upon_a_time')

describe('layerswarm generate (local)', () => {
  it('prints llama2.c reference text for the bundled GGUF (default model)', () => {
    const r = runCli(['generate', '--prompt', 'Once upon a time', '--max-tokens', '64', '--temperature', '0'])
    expect(r.stderr).toBe('')
    expect(r.status).toBe(0)
    expect(r.stdout).toBe(`${ref.text}\n`)
  })

  it('prints the same for the llama2.c .bin with tok512.bin, as JSON', () => {
    const r = runCli([
      'generate', '--model', BIN_PATH, '--tokenizer', TOK_PATH, '--prompt', 'Once upon a time',
      '--max-tokens', '64', '--temperature', '0', '--json'
    ])
    expect(r.status).toBe(0)
    const out = JSON.parse(r.stdout)
    expect(out.promptTokens).toEqual(ref.prompt_tokens)
    expect(out.tokens).toEqual(ref.generated_tokens)
    expect(out.text).toBe(ref.text)
  })

  it('seeded sampling is reproducible', () => {
    const args = ['generate', '--prompt', 'The dog', '--max-tokens', '30', '--temperature', '0.9', '--top-k', '40', '--seed', '123', '--json']
    const a = JSON.parse(runCli(args).stdout)
    const b = JSON.parse(runCli(args).stdout)
    expect(a.tokens).toEqual(b.tokens)
    expect(a.seed).toBe(123)
    const c = JSON.parse(runCli([...args.slice(0, -3), '--seed', '124', '--json']).stdout)
    expect(c.tokens).not.toEqual(a.tokens)
  })

  it('fails clearly on bad input', () => {
    const missing = runCli(['generate', '--model', '/nonexistent/model.gguf', '--prompt', 'x'])
    expect(missing.status).toBe(1)
    expect(missing.stderr).toMatch(/no such file/i)
    const notModel = runCli(['generate', '--model', TOK_PATH.replace('.bin', '.model'), '--prompt', 'x'])
    expect(notModel.status).toBe(1)
    const badTemp = runCli(['generate', '--prompt', 'x', '--temperature', '-1'])
    expect(badTemp.status).not.toBe(0)
    expect(badTemp.stderr).toMatch(/temperature/)
    const help = runCli(['generate', '--help'])
    expect(help.stdout).toMatch(/--max-tokens/)
  })
})
