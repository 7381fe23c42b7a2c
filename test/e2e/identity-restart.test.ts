/**
 * Issue #19, identity: a node restarted with its key file keeps its peer id, so a bootstrap
 * address written before the restart still works, and a client's ban on it (a canary conviction
 * kept in the trust file beside the client's own key) survives: restarting is no escape.
 * Real node processes on 127.0.0.1, the real CLI as the client.
 */
import { mkdtempSync, readFileSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { type LocalNode, startLocalNode } from '../../node/cli/local-swarm.js'
import { cliAsync } from '../helpers/cli-async.js'
import { GGUF_PATH, loadReference } from '../helpers/reference.js'

const ref = loadReference('stories260K_greedy_once_upon_a_time')
const FAST = ['--kernels', 'reference', '--announce-interval', '300']

interface Report {
  excludedPeers: string[]
  routes: Array<Array<{ peerId: string }>>
}

describe('a node keeps its identity across restarts', () => {
  const home = mkdtempSync(join(tmpdir(), 'layerswarm-identity-'))
  const nodeKey = join(home, 'node', 'identity.key')
  const clientKey = join(home, 'client', 'client-identity.key')
  const nodes: LocalNode[] = []
  afterAll(async () => {
    await Promise.all(nodes.map((n) => n.stop()))
  })

  const generate = async (bootstrap: string[]) => {
    const r = await cliAsync(
      [
        'generate',
        '--model',
        GGUF_PATH,
        '--bootstrap',
        bootstrap.join(','),
        '--identity',
        clientKey,
        '--prompt',
        ref.prompt,
        '--max-tokens',
        '48',
        '--temperature',
        '0',
        '--json'
      ],
      120_000
    )
    expect(r.status, r.stderr).toBe(0)
    return JSON.parse(r.stdout) as { tokens: number[]; report: Report }
  }

  it('same peer id after a restart; the old bootstrap address works; the ban survives', { timeout: 240_000 }, async () => {
    // A tamperer with a kept key serves the whole remote span (the cheapest route, so it is tried first).
    const tamperArgs = ['--identity', nodeKey, '--tamper', 'noise', '--tamper-size', '0.5', ...FAST]
    const first = await startLocalNode({ model: GGUF_PATH, layers: '1:4', args: tamperArgs })
    nodes.push(first)
    expect(statSync(nodeKey).mode & 0o777).toBe(0o600)
    const written = first.addrs[0] // what a friend would paste into their config before the restart
    expect(written).toContain(`/p2p/${first.peerId}`)
    const bootstrap = [written]
    nodes.push(await startLocalNode({ model: GGUF_PATH, layers: '1:2', bootstrap, args: FAST }))
    nodes.push(await startLocalNode({ model: GGUF_PATH, layers: '2:4', bootstrap, args: FAST }))

    // The client convicts the tamperer; the conviction lands in trust.json beside the client's key.
    const run1 = await generate(nodes.map((n) => n.addrs[0]))
    expect(run1.tokens).toEqual(ref.generated_tokens.slice(0, 48))
    expect(run1.report.excludedPeers).toContain(first.peerId)
    const trust = JSON.parse(readFileSync(join(home, 'client', 'trust.json'), 'utf8'))
    const records = Object.values(trust.models as Record<string, { peers: Array<{ peerId: string; excluded: boolean }> }>)[0]
    expect(records.peers.find((p) => p.peerId === first.peerId)?.excluded).toBe(true)

    // Restart on the same port with the same key, now without tampering (a convicted peer trying a fresh start).
    await first.stop()
    nodes.splice(nodes.indexOf(first), 1)
    const port = /\/tcp\/(\d+)\//.exec(written)?.[1]
    const again = await startLocalNode({
      model: GGUF_PATH,
      layers: '1:4',
      args: ['--identity', nodeKey, '--listen', `/ip4/127.0.0.1/tcp/${port}`, ...FAST]
    })
    nodes.push(again)
    expect(again.peerId).toBe(first.peerId)
    expect(again.addrs).toContain(written)

    // Only the address written before the restart: it still dials, and through it the client finds
    // the honest peers; the restarted peer stays banned (never routed).
    const run2 = await generate([written])
    expect(run2.tokens).toEqual(ref.generated_tokens.slice(0, 48))
    expect(run2.report.excludedPeers).toContain(first.peerId)
    for (const route of run2.report.routes) expect(route.map((h) => h.peerId)).not.toContain(first.peerId)
  })

  it('refuses a key file others may read, with a typed error', async () => {
    const { chmodSync } = await import('node:fs')
    const exposed = join(home, 'exposed.key')
    const made = await cliAsync(['identity', 'new', '--identity', exposed, '--json'])
    expect(made.status).toBe(0)
    chmodSync(exposed, 0o640)
    const r = await cliAsync(['node', 'start', '--identity', exposed, '--layers', '0:1'])
    expect(r.status).toBe(1)
    expect(r.stderr).toMatch(/^layerswarm: identity .* has mode 640.*\(IDENTITY_FILE_EXPOSED\)\n$/)
  })
})
