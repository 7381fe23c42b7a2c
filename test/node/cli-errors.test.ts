/**
 * Issue 21, items 3-5: every bad input ends in one line `layerswarm: <message> (<CODE>)` and a
 * non-zero status, with no stack trace and no help page; and output is never cut by exiting
 * before stdout drained.
 */
import { spawn } from 'node:child_process'
import { createServer, type Server } from 'node:net'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { runCli } from '../helpers/cli.js'
import { ONE_LINE_ERROR } from '../helpers/cli-async.js'
import { ROOT } from '../helpers/reference.js'

function expectOneLine(r: { status: number | null; stderr: string }, code: string, message?: RegExp): void {
  // `node start` logs JSON lines on stderr (pino, in a pipe) before it fails; the error is the rest
  const text = r.stderr
    .split('\n')
    .filter((l) => !l.startsWith('{"level"'))
    .join('\n')
  expect(text).toMatch(ONE_LINE_ERROR)
  expect(text).toContain(`(${code})`)
  expect(r.stderr).not.toMatch(/\n\s+at /) // no stack frame
  expect(r.stderr).not.toMatch(/Usage:|Options:/) // no help page
  if (message) expect(text).toMatch(message)
  expect(r.status).not.toBe(0)
}

async function listening(): Promise<Server> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return server
}

const portOf = (s: Server): number => (s.address() as { port: number }).port
const A_PEER_ID = '12D3KooWQYhTNQdmr3ArTeUHRYzFg94BKyTkoWBDWez9kSCVe2Xo'

describe('CLI errors are one line with a code', () => {
  let busy: Server
  let freePort: number
  beforeAll(async () => {
    busy = await listening()
    const s = await listening()
    freePort = portOf(s)
    await new Promise((r) => s.close(r))
  })
  afterAll(async () => {
    await new Promise((r) => busy.close(r))
  })

  it('bad option values, without the help page', () => {
    expectOneLine(
      runCli(['generate', '--prompt', 'x', '--max-tokens', '-1']),
      'BAD_OPTION',
      /--max-tokens must be an integer ≥ 0/
    )
    const t = runCli(['generate', '--prompt', 'x', '--temperature', '-2'])
    expectOneLine(t, 'BAD_OPTION', /--temperature must be a number ≥ 0/)
    expect(t.stderr).not.toMatch(/Infinity/)
    expectOneLine(runCli(['generate', '--prompt', 'x', '--bogus']), 'UNKNOWN_OPTION')
    expectOneLine(runCli(['generate', '--prompt', 'x', '--standby']), 'BAD_OPTION', /--snapshot-every/)
    expectOneLine(runCli(['frobnicate']), 'UNKNOWN_COMMAND')
    expectOneLine(runCli(['node', 'start', '--layers', '3:1']), 'BAD_OPTION', /--layers 3:1: expected a:b .*5 blocks/)
  })

  it('a missing model file', () => {
    expectOneLine(runCli(['generate', '--prompt', 'x', '--model', '/nonexistent/m.gguf']), 'MODEL_NOT_FOUND', /no such file/)
    expectOneLine(runCli(['node', 'start', '--model', '/nonexistent/m.gguf']), 'MODEL_NOT_FOUND')
  })

  it('bad --listen and a port in use', () => {
    expectOneLine(
      runCli(['node', 'start', '--listen', '0.0.0.0:4001']),
      'BAD_LISTEN_ADDRESS',
      /use a multiaddr, e\.g\. \/ip4\/0\.0\.0\.0\/tcp\/4001/
    )
    expectOneLine(runCli(['node', 'start', '--listen', `/ip4/127.0.0.1/tcp/${portOf(busy)}`]), 'ADDRESS_IN_USE')
  })

  it('bad bootstrap addresses: not a multiaddr, host:port, nothing listening', () => {
    for (const cmd of [['generate', '--prompt', 'x'], ['swarm']]) {
      expectOneLine(runCli([...cmd, '--bootstrap', 'not-a-multiaddr']), 'BAD_BOOTSTRAP_ADDRESS', /is not a multiaddr/)
      expectOneLine(
        runCli([...cmd, '--bootstrap', '192.168.1.10:4001']),
        'BAD_BOOTSTRAP_ADDRESS',
        /use the multiaddr a node prints, e\.g\. \/ip4\/192\.168\.1\.10\/tcp\/4001\/p2p\/<peer id>/
      )
      expectOneLine(
        runCli([...cmd, '--bootstrap', `/ip4/127.0.0.1/tcp/${freePort}/p2p/${A_PEER_ID}`]),
        'BOOTSTRAP_UNREACHABLE',
        /connection refused/
      )
    }
  })

  it('a prompt longer than the context fails like the gateway', () => {
    const r = runCli(['generate', '--prompt', 'Once upon a time '.repeat(300), '--max-tokens', '4'])
    expectOneLine(r, 'CONTEXT_LENGTH_EXCEEDED', /maximum context length is 512 tokens; your prompt has \d+/)
    expect(r.stdout).toBe('')
  })

  it('help pages: LAYERSWARM_API_KEY only on api, --tamper* only under node start --help-dev', () => {
    for (const cmd of [['generate'], ['swarm'], ['node', 'start'], ['doctor']])
      expect(runCli([...cmd, '--help']).stdout).not.toMatch(/API_KEY/)
    expect(runCli(['api', '--help']).stdout).toMatch(/LAYERSWARM_API_KEY/)
    const help = runCli(['node', 'start', '--help'])
    expect(help.status).toBe(0)
    expect(help.stdout).not.toMatch(/--tamper/)
    expect(help.stdout).toMatch(/--help-dev/)
    expect(runCli(['node', 'start', '--help-dev']).stdout).toMatch(/--tamper-rate/)
  })
})

describe('the CLI exits only once stdout drained', () => {
  /** Run a script that writes `bytes` to stdout, then ends as `how` says; read it slowly. */
  function slowRead(how: 'drained' | 'exit'): Promise<number> {
    const exitModule = join(ROOT, 'dist', 'node', 'cli', 'cli-exit.js')
    const script = `
      const { exitWhenDrained } = await import(${JSON.stringify(exitModule)})
      process.stdout.write('x'.repeat(300_000))
      ${how === 'drained' ? 'await exitWhenDrained()' : 'process.exit(0)'}
    `
    return new Promise((resolve) => {
      const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] })
      let n = 0
      child.stdout.pause() // a slow reader: the pipe fills up
      setTimeout(() => {
        child.stdout.on('data', (d: Buffer) => (n += d.length))
        child.stdout.resume()
      }, 1_000)
      child.stdout.on('end', () => resolve(n))
    })
  }

  it('all 300 kB reach a slow pipe (a bare process.exit() cuts them, as `generate --json | wc -c` showed)', async () => {
    expect(await slowRead('drained')).toBe(300_000)
    expect(await slowRead('exit')).toBeLessThan(300_000)
  })
})
