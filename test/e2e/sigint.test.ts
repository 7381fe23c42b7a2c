/**
 * Issue #31 item 3: Ctrl-C. The first SIGINT stops a local `generate` (which ignored it until the
 * context was full: its steps are synchronous work and the signal never got a turn of the event
 * loop), a swarm `generate`, `api` and `node start`; each exits 130 (docs/cli.md), what was
 * generated stays printed, and a node leaves cleanly (its key's lock file removed). The model's
 * context (32768 tokens) and --max-tokens are long enough that a run ignoring the signal would
 * go on for minutes; the test allows a generous 20 s for the stop (1 s is the design target,
 * not asserted on a loaded host).
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { once } from 'node:events'
import { existsSync, mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type LocalNode, startLocalNode } from '../../node/cli/local-swarm.js'
import { CLI, runCli } from '../helpers/cli.js'
import { startReadmeNode } from '../helpers/readme-node.js'
import { ROOT } from '../helpers/reference.js'

/** A generous bound on the stop: a run that ignores SIGINT goes on for minutes. */
const STOP_BOUND_MS = 20_000

interface Running {
  child: ChildProcess
  stdout: () => string
  stderr: () => string
  exited: Promise<number | null>
}

function spawnCli(args: string[], env: NodeJS.ProcessEnv = process.env): Running {
  const child = spawn(process.execPath, [CLI, ...args], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  let err = ''
  child.stdout!.on('data', (d) => (out += d))
  child.stderr!.on('data', (d) => (err += d))
  const exited = once(child, 'exit').then(([code]) => code as number | null)
  return { child, stdout: () => out, stderr: () => err, exited }
}

async function until(cond: () => boolean, what: string, timeoutMs = 120_000): Promise<void> {
  const t0 = Date.now()
  while (!cond()) {
    if (Date.now() - t0 > timeoutMs) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

/** SIGINT, then the exit status; a process still running after STOP_BOUND_MS is killed and fails the test. */
async function interrupt(r: Running): Promise<number | null> {
  r.child.kill('SIGINT')
  const timer = setTimeout(() => r.child.kill('SIGKILL'), STOP_BOUND_MS)
  const code = await r.exited
  clearTimeout(timer)
  return code
}

describe('Ctrl-C (SIGINT) stops every long-running command with status 130', () => {
  const dir = mkdtempSync(join(tmpdir(), 'layerswarm-sigint-'))
  const model = join(dir, 'long-context.gguf')
  let node: LocalNode | undefined
  beforeAll(() => {
    const made = runCli(['make-model', '--shape', 'tiny', '--context', '32768', '--out', model])
    expect(made.status, made.stderr).toBe(0)
  })
  afterAll(async () => {
    await node?.stop()
  })

  it('a local generate stops, keeps what it printed, exits 130', { timeout: 180_000 }, async () => {
    const r = spawnCli(['generate', '--model', model, '--prompt', 'hi', '--max-tokens', '32000', '--temperature', '0'])
    await until(() => r.stdout().length > 16, 'the first tokens')
    const code = await interrupt(r)
    expect(code, r.stderr()).toBe(130)
    expect(r.stdout().length).toBeGreaterThan(16)
    expect(r.stdout().endsWith('\n')).toBe(true)
    expect(r.stderr()).toBe('')
  })

  it('a swarm generate and api stop with 130', { timeout: 240_000 }, async () => {
    node = await startLocalNode({ model, layers: '0:3', args: ['--kernels', 'reference'] })
    const boot = node.addrs[0]
    const gen = spawnCli([
      'generate',
      '--model',
      model,
      '--bootstrap',
      boot,
      '--prompt',
      'hi',
      '--max-tokens',
      '32000',
      '--temperature',
      '0',
      '--canary-rate',
      '0',
      // a pipe gets only the final text by default; streamed, the tokens come as they are made
      '--stream',
      'always'
    ])
    await until(() => gen.stdout().length > 16, 'the first tokens through the swarm', 180_000)
    expect(await interrupt(gen), gen.stderr()).toBe(130)

    const api = spawnCli(['api', '--model', model, '--bootstrap', boot, '--listen', '127.0.0.1:0'])
    await until(() => api.stdout().includes('\n'), "the gateway's url line")
    expect(JSON.parse(api.stdout().split('\n')[0]).url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/)
    expect(await interrupt(api), api.stderr()).toBe(130)
  })

  it('node start leaves cleanly on SIGINT: 130, its key unlocked', { timeout: 120_000 }, async () => {
    const home = mkdtempSync(join(tmpdir(), 'layerswarm-sigint-home-'))
    const n = await startReadmeNode(home, ['--model', model, '--layers', '0:3', '--listen', '/ip4/127.0.0.1/tcp/0'])
    expect(n.identity).toBe(join(home, 'identity.key'))
    expect(existsSync(join(home, 'identity.key.lock'))).toBe(true)
    const timer = setTimeout(() => n.process.kill('SIGKILL'), STOP_BOUND_MS)
    const code = await n.stop('SIGINT')
    clearTimeout(timer)
    expect(code, n.stderr.join('\n')).toBe(130)
    expect(n.stderr.join('\n')).toContain('"msg":"stopped"')
    expect(existsSync(join(home, 'identity.key.lock'))).toBe(false)
  })
})
