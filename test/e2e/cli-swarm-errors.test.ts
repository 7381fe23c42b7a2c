/**
 * Issue 21 against a real local swarm (node processes on 127.0.0.1): bad bootstrap addresses
 * are reported, a missing route is explained, `swarm` says what it does not know, `doctor`
 * checks the setup, and nothing is printed to stdout before a route exists.
 */
import { spawn } from 'node:child_process'
import { createServer } from 'node:net'
import { createInterface } from 'node:readline'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createClient } from '../../client/index.js'
import { type LocalNode, startLocalNode } from '../../node/cli/local-swarm.js'
import { CLI } from '../helpers/cli.js'
import { cliAsync, ONE_LINE_ERROR } from '../helpers/cli-async.js'
import { GGUF_PATH, loadReference, ROOT } from '../helpers/reference.js'

const ref = loadReference('stories260K_greedy_once_upon_a_time')
const STALE_ID = '12D3KooWQYhTNQdmr3ArTeUHRYzFg94BKyTkoWBDWez9kSCVe2Xo'

/** A TCP port nothing listens on (bound, then released). */
async function deadPort(): Promise<number> {
  const s = createServer()
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r))
  const port = (s.address() as { port: number }).port
  await new Promise((r) => s.close(r))
  return port
}

describe('CLI and a real swarm: what goes wrong is said', () => {
  const nodes: LocalNode[] = []
  let boot: string
  let deadAddr: string

  beforeAll(async () => {
    nodes.push(await startLocalNode({ model: GGUF_PATH, layers: '1:3', args: ['--announce-interval', '300'] }))
    boot = nodes[0].addrs[0]
    nodes.push(await startLocalNode({ model: GGUF_PATH, layers: '3:4', bootstrap: [boot], args: ['--announce-interval', '300'] }))
    // another peer id: libp2p would merge a dial of the same id with the good address
    deadAddr = `/ip4/127.0.0.1/tcp/${await deadPort()}/p2p/${STALE_ID}`
  }, 90_000)

  afterAll(async () => {
    await Promise.all(nodes.map((n) => n.stop()))
  })

  it('a stale peer id in a bootstrap address', async () => {
    const stale = boot.replace(nodes[0].peerId, STALE_ID)
    for (const cmd of [['generate', '--prompt', 'x'], ['swarm']]) {
      const r = await cliAsync([...cmd, '--bootstrap', stale])
      expect(r.stderr).toMatch(ONE_LINE_ERROR)
      expect(r.stderr).toContain('(BOOTSTRAP_PEER_ID)')
      expect(r.status).not.toBe(0)
    }
  })

  it('node start and api warn about each bootstrap that failed, and serve anyway', { timeout: 90_000 }, async () => {
    const n = await startLocalNode({ model: GGUF_PATH, layers: '0:1', bootstrap: [deadAddr, boot] })
    try {
      // stderr and stdout are separate pipes: the warning may arrive after the "serving" line
      for (let i = 0; i < 50 && !n.logs.some((l) => l.startsWith('layerswarm: warning:')); i++)
        await new Promise((r) => setTimeout(r, 100))
      expect(n.logs.filter((l) => l.startsWith('layerswarm: warning:'))).toEqual([
        expect.stringMatching(/cannot reach bootstrap peer .*connection refused.*\(BOOTSTRAP_UNREACHABLE\)$/)
      ])
    } finally {
      await n.stop()
    }
    const api = spawn(process.execPath, [CLI, 'api', '--bootstrap', `${deadAddr},${boot}`, '--listen', '127.0.0.1:0'], {
      cwd: ROOT
    })
    try {
      const stderr: string[] = []
      createInterface({ input: api.stderr }).on('line', (l) => stderr.push(l))
      const first = await new Promise<string>((resolve) => createInterface({ input: api.stdout }).once('line', resolve))
      expect(JSON.parse(first).url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/)
      for (let i = 0; i < 50 && !stderr.some((l) => l.startsWith('layerswarm: warning:')); i++)
        await new Promise((r) => setTimeout(r, 100))
      expect(stderr.filter((l) => l.startsWith('layerswarm: warning:'))).toEqual([
        expect.stringMatching(/cannot reach bootstrap peer .*\(BOOTSTRAP_UNREACHABLE\)$/)
      ])
    } finally {
      api.kill('SIGTERM')
    }
  })

  it('a missing route: "finding peers…" while waiting, --verbose explains, no prompt echo', { timeout: 90_000 }, async () => {
    const r = await cliAsync(
      ['generate', '--bootstrap', boot, '--prompt', ref.prompt, '--edge-last', '0', '--verbose', '--canary-rate', '0'],
      80_000
    )
    expect(r.status).toBe(1)
    expect(r.stdout).toBe('') // the prompt is echoed only once tokens come back
    expect(r.stderr).toMatch(/finding peers… \(3 of 4 blocks covered/)
    expect(r.stderr).toMatch(/route: bootstrap peer \S+: connected, handed over \d+ announcement\(s\)/)
    expect(r.stderr).toContain(`route: peer ${nodes[1].peerId}: answered, serves blocks [3, 4)`)
    expect(r.stderr).toMatch(/route: blocks \[1, 5\) needed from the swarm; nobody reachable serves 4/)
    expect(r.stderr.trim().split('\n').at(-1)).toMatch(/^layerswarm: .*nobody serves block\(s\) 4 \(NO_ROUTE\)$/)
  })

  it('a prompt longer than the context, through the swarm', async () => {
    const r = await cliAsync(['generate', '--bootstrap', boot, '--prompt', 'Once upon a time '.repeat(300)])
    expect(r.stderr).toMatch(ONE_LINE_ERROR)
    expect(r.stderr).toContain('(CONTEXT_LENGTH_EXCEEDED)')
    expect(r.status).toBe(1)
    expect(r.stdout).toBe('')
  })

  it('generate --json through the swarm has stats, as a local run', async () => {
    const r = await cliAsync([
      'generate',
      '--bootstrap',
      boot,
      '--prompt',
      ref.prompt,
      '--max-tokens',
      '8',
      '--temperature',
      '0',
      '--json'
    ])
    expect(r.status).toBe(0)
    const out = JSON.parse(r.stdout)
    expect(out.tokens).toEqual(ref.generated_tokens.slice(0, 8))
    expect(Object.keys(out.stats).sort()).toEqual(['decodeMs', 'decodeTokensPerSecond', 'loadMs', 'prefillMs'])
  })

  it('swarm names the model size and the blocks nobody serves; --json has stats', async () => {
    const r = await cliAsync(['swarm', '--bootstrap', boot, '--wait', '0'])
    expect(r.status).toBe(0)
    expect(r.stdout).toContain(`model ${nodes[0].modelId} (5 blocks)`)
    expect(r.stdout).toContain('3 of 5 blocks served; gaps: blocks 0, 4')
    expect(r.stdout).toContain(`[3, 4)  ${nodes[1].peerId}`) // from the announcements the bootstrap peer holds
    const j = await cliAsync(['swarm', '--bootstrap', boot, '--wait', '0', '--json'])
    const out = JSON.parse(j.stdout)
    expect(out.models).toEqual([
      // issue 33: the readable name from the GGUF metadata rides in the announcements
      { modelId: nodes[0].modelId, nLayers: 5, covered: [1, 2, 3], gaps: [0, 4], name: 'llama 293K F32' }
    ])
    expect(out.stats).toMatchObject({ peers: 2, models: 1, bootstrapPeers: 1, bootstrapFailed: 0 })
    expect(out.partial).toBe(false)
  })

  it('the SDK defaults model to the bundled file, as the CLI', async () => {
    const client = await createClient({ bootstrap: [boot], canaries: false })
    try {
      const r = await client.generate(ref.prompt, { maxTokens: 4, temperature: 0 })
      expect(r.tokens).toEqual(ref.generated_tokens.slice(0, 4))
    } finally {
      await client.close()
    }
  })

  it('doctor: one line per check, non-zero when one fails', { timeout: 90_000 }, async () => {
    const r = await cliAsync(['doctor', '--bootstrap', `${boot},${deadAddr}`])
    const lines = r.stdout.trim().split('\n')
    expect(lines[0]).toMatch(/^ok +model +\S+stories260K\.gguf: 5 blocks/)
    expect(lines[1]).toMatch(/^ok +listen +\/ip4\/127\.0\.0\.1\/tcp\/0: free$/)
    expect(lines[2]).toMatch(
      /^ok +bootstrap +\S+: answers in [\d.]+ ms, serves blocks \[1, 3\) .*\(your model\), holds \d+ announcement/
    )
    expect(lines[3]).toMatch(/^FAIL +bootstrap +cannot reach bootstrap peer .*\(BOOTSTRAP_UNREACHABLE\)$/)
    expect(lines[4]).toMatch(/^ok +coverage +blocks 1\.\.3 of 5 .* served by 2 peer\(s\)$/)
    // issue 40: the CPU's features and where each kernel runs, as information after the checks
    expect(lines[5]).toMatch(/^info +kernels +.+ \((x64|arm64|ia32); [^)]*\): /)
    expect(r.stderr).toMatch(/^layerswarm: 1 of 5 checks failed \(DOCTOR\)\n$/)
    expect(r.status).toBe(1)
  })
})
