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
      'generate',
      '--model',
      BIN_PATH,
      '--tokenizer',
      TOK_PATH,
      '--prompt',
      'Once upon a time',
      '--max-tokens',
      '64',
      '--temperature',
      '0',
      '--json'
    ])
    expect(r.status).toBe(0)
    const out = JSON.parse(r.stdout)
    expect(out.promptTokens).toEqual(ref.prompt_tokens)
    expect(out.tokens).toEqual(ref.generated_tokens)
    expect(out.text).toBe(ref.text)
  })

  it('seeded sampling is reproducible', () => {
    const args = [
      'generate',
      '--prompt',
      'The dog',
      '--max-tokens',
      '30',
      '--temperature',
      '0.9',
      '--top-k',
      '40',
      '--seed',
      '123',
      '--json'
    ]
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

describe('options from the environment and config files', () => {
  it('command line > environment > config file > defaults, for every command', async () => {
    const { mkdtempSync, writeFileSync } = await import('node:fs')
    const { join } = await import('node:path')
    const { tmpdir } = await import('node:os')
    const { spawnSync } = await import('node:child_process')
    const { CLI } = await import('../helpers/cli.js')
    const dir = mkdtempSync(join(tmpdir(), 'layerswarm-config-'))
    const file = join(dir, 'config.json')
    writeFileSync(file, JSON.stringify({ prompt: 'Once upon a time', 'max-tokens': 5, temperature: 0, json: true }))
    const run = (args: string[], env: Record<string, string> = {}) => {
      const r = spawnSync(process.execPath, [CLI, 'generate', ...args], { encoding: 'utf8', env: { ...process.env, ...env } })
      return { status: r.status, out: r.stdout ? JSON.parse(r.stdout) : undefined, stderr: r.stderr }
    }
    expect(run(['--config', file]).out.tokens).toHaveLength(5) // the file alone, --prompt included
    expect(run(['--config', file], { LAYERSWARM_MAX_TOKENS: '3' }).out.tokens).toHaveLength(3) // env beats the file
    expect(run(['--config', file, '--max-tokens', '2'], { LAYERSWARM_MAX_TOKENS: '3' }).out.tokens).toHaveLength(2) // CLI beats env
    expect(run([], { LAYERSWARM_CONFIG: file }).out.tokens).toHaveLength(5)
    const missing = run(['--max-tokens', '2'])
    expect(missing.status).not.toBe(0)
    expect(missing.stderr).toMatch(/--prompt/)
    writeFileSync(file, JSON.stringify({ prompt: 'x', 'max-tokns': 5 }))
    expect(run(['--config', file]).stderr).toMatch(/unknown option max-tokns/)
  })
})
