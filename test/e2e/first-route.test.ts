/**
 * Issue #31 item 5: the first generation right after nodes start. Announcements of nodes that
 * started a moment ago may not have arrived: the client waits for coverage up to its route
 * deadline, says so on the "finding peers" line (with the deadline), and succeeds once the
 * blocks are served; only after the deadline does it fail with NO_ROUTE. Real node processes on
 * 127.0.0.1 and the real CLI, no sleeps between the starts and the generation.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { once } from 'node:events'
import { afterEach, describe, expect, it } from 'vitest'
import { type LocalNode, startLocalNode } from '../../node/cli/local-swarm.js'
import { CLI } from '../helpers/cli.js'
import { GGUF_PATH, loadReference, ROOT } from '../helpers/reference.js'

const ref = loadReference('stories260K_greedy_once_upon_a_time')
const TOKENS = 16

function generate(boot: string): {
  child: ChildProcess
  stderr: () => string
  done: Promise<{ status: number | null; stdout: string }>
} {
  const child = spawn(
    process.execPath,
    [CLI, 'generate', '--model', GGUF_PATH, '--bootstrap', boot, '--prompt', ref.prompt, '--max-tokens', String(TOKENS)].concat([
      '--temperature',
      '0',
      '--canary-rate',
      '0',
      '--json'
    ]),
    { cwd: ROOT }
  )
  let out = ''
  let err = ''
  child.stdout.on('data', (d) => (out += d))
  child.stderr.on('data', (d) => (err += d))
  const done = once(child, 'exit').then(([status]) => ({ status: status as number | null, stdout: out }))
  return { child, stderr: () => err, done }
}

describe('the first generation right after the nodes start', () => {
  const nodes: LocalNode[] = []
  afterEach(async () => {
    await Promise.all(nodes.splice(0).map((n) => n.stop()))
  })

  it('a client that finds blocks missing waits for them (and says how long it will), then generates', {
    timeout: 180_000
  }, async () => {
    const first = await startLocalNode({ model: GGUF_PATH, layers: '0:2' })
    nodes.push(first)
    const g = generate(first.addrs[0])
    // the client is waiting: only now does the node serving the rest start
    for (let i = 0; i < 1200 && !g.stderr().includes('finding peers'); i++) await new Promise((r) => setTimeout(r, 50))
    expect(g.stderr()).toMatch(/finding peers… \(\d+ of 3 blocks covered.*; waiting up to 10 s, then NO_ROUTE\)/)
    nodes.push(await startLocalNode({ model: GGUF_PATH, layers: '2:5', bootstrap: [first.addrs[0]] }))
    const r = await g.done
    expect(r.status, g.stderr()).toBe(0)
    expect((JSON.parse(r.stdout) as { tokens: number[] }).tokens).toEqual(ref.generated_tokens.slice(0, TOKENS))
  })

  it('nodes started together with the generation: every first generation succeeds', { timeout: 300_000 }, async () => {
    for (let round = 0; round < 3; round++) {
      const first = await startLocalNode({ model: GGUF_PATH, layers: '0:2' })
      nodes.push(first)
      const boot = [first.addrs[0]]
      // the other nodes and the client start at once; nobody waits for anybody's announcement
      const starting = ['1:3', '2:4', '3:5'].map((layers) => startLocalNode({ model: GGUF_PATH, layers, bootstrap: boot }))
      const g = generate(boot[0])
      nodes.push(...(await Promise.all(starting)))
      const r = await g.done
      expect(r.status, `round ${round}: ${g.stderr()}`).toBe(0)
      expect((JSON.parse(r.stdout) as { tokens: number[] }).tokens).toEqual(ref.generated_tokens.slice(0, TOKENS))
      await Promise.all(nodes.splice(0).map((n) => n.stop()))
    }
  })
})
