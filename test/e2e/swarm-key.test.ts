/**
 * Issue #38, private swarms end to end: every peer its own process on 127.0.0.1, real TCP, pnet
 * (XSalsa20 under the swarm key), Noise and yamux.
 *
 * - a node with another key is refused: it exits with one SWARM_KEY_MISMATCH line, and the node
 *   it dialled prints one too; `join` with another key never serves;
 * - an invite with an expiry is refused once expired (INVITE_EXPIRED);
 * - `join --invite` takes the key from the token and serves only after the key check passed: a
 *   client that joins by invite then generates the reference tokens through the joined node;
 * - a client without the key is refused, one coded line on each side.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { mkdtempSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { type LocalNode, startLocalNode } from '../../node/cli/local-swarm.js'
import { CLI } from '../helpers/cli.js'
import { cliAsync, ONE_LINE_ERROR } from '../helpers/cli-async.js'
import { GGUF_PATH, loadReference, ROOT } from '../helpers/reference.js'

const ref = loadReference('stories260K_greedy_once_upon_a_time')
const FAST = ['--kernels', 'reference', '--announce-interval', '300']
const dir = mkdtempSync(join(tmpdir(), 'layerswarm-swarm-key-'))
const K1 = join(dir, 'k1.key')
const K2 = join(dir, 'k2.key')
/** A fresh LAYERSWARM_HOME per process: nothing carries over but what the test passes. */
const home = (name: string): NodeJS.ProcessEnv => ({ ...process.env, LAYERSWARM_HOME: join(dir, name), HOME: join(dir, name) })

/** The error lines and warning lines with a code, e.g. SWARM_KEY_MISMATCH, among `lines`. */
const coded = (lines: readonly string[], code: string): string[] =>
  lines.filter((l) => l.startsWith('layerswarm: ') && l.endsWith(`(${code})`))

describe('private swarms (swarm keys, invites)', () => {
  let a: LocalNode
  let joiner: ChildProcess | undefined
  const joinerErr: string[] = []
  beforeAll(async () => {
    for (const k of [K1, K2]) {
      const r = await cliAsync(['swarm-key', 'new', '--out', k], 30_000, home('keys'))
      expect(r.status, r.stderr).toBe(0)
      expect(JSON.parse(r.stdout).fingerprint).toMatch(/^[0-9a-f]{16}$/)
    }
    expect(readFileSync(K1, 'utf8')).not.toBe(readFileSync(K2, 'utf8'))
    a = await startLocalNode({ model: GGUF_PATH, layers: '0:3', args: [...FAST, '--swarm-key', K1], env: home('a') })
  }, 120_000)
  afterAll(async () => {
    if (joiner && joiner.exitCode === null) {
      joiner.kill('SIGTERM')
      await new Promise((r) => joiner!.once('exit', r))
    }
    await a?.stop()
  })

  it('a node with another key is refused: one coded line on each side, and it does not serve', { timeout: 120_000 }, async () => {
    const r = await cliAsync(
      [
        'node',
        'start',
        '--model',
        GGUF_PATH,
        '--layers',
        '3:5',
        '--bootstrap',
        a.addrs[0],
        '--ephemeral-identity',
        '--swarm-key',
        K2,
        ...FAST
      ],
      90_000,
      home('stranger')
    )
    expect(r.status, r.stderr).toBe(1)
    expect(r.stdout).toBe('') // never printed its serving line
    const lines = r.stderr.split('\n').filter((l) => l.startsWith('layerswarm: '))
    expect(lines.length).toBe(1)
    expect(`${lines[0]}\n`).toMatch(ONE_LINE_ERROR)
    expect(lines[0]).toMatch(/\(SWARM_KEY_MISMATCH\)$/)
    // the refusing side's line may come a moment after the refused process exited
    await vi.waitFor(() => expect(coded(a.logs, 'SWARM_KEY_MISMATCH').length).toBe(1), { timeout: 20_000, interval: 100 })
    expect(coded(a.logs, 'SWARM_KEY_MISMATCH')[0]).toMatch(
      /^layerswarm: warning: refused a connection from \/ip4\/127\.0\.0\.1\//
    )

    // join with another key: refused before it starts any node
    const j = await cliAsync(
      ['join', '--model', GGUF_PATH, '--bootstrap', a.addrs[0], '--num-blocks', '1', '--swarm-key', K2, ...FAST],
      90_000,
      home('stranger-join')
    )
    expect(j.status, j.stderr).toBe(1)
    expect(j.stdout).not.toContain('"serving"')
    expect(coded(j.stderr.split('\n'), 'SWARM_KEY_MISMATCH').length).toBe(1)
  })

  it('an expired invite is refused; a valid one joins a node that serves, and a client by invite generates through it', {
    timeout: 240_000
  }, async () => {
    const expired = await cliAsync(
      ['invite', '--bootstrap', a.addrs[0], '--model', GGUF_PATH, '--swarm-key', K1, '--expires', '1ms'],
      30_000,
      home('a')
    )
    expect(expired.status, expired.stderr).toBe(0)
    const staleToken = expired.stdout.trim()
    expect(staleToken).toMatch(/^lsinv1\.[A-Za-z0-9_-]+$/)
    // the inviter is told the token is a secret
    expect(coded(expired.stderr.split('\n'), 'INVITE_IS_SECRET').length).toBe(1)
    for (const cmd of [
      ['join', '--num-blocks', '1'],
      ['generate', '--prompt', 'x']
    ]) {
      const r = await cliAsync([...cmd, '--model', GGUF_PATH, '--invite', staleToken], 30_000, home('late'))
      expect(r.status, r.stderr).toBe(1)
      expect(r.stderr).toMatch(ONE_LINE_ERROR)
      expect(r.stderr).toMatch(/\(INVITE_EXPIRED\)\n$/)
      expect(r.stderr + r.stdout).not.toContain(staleToken)
    }

    const inv = await cliAsync(
      ['invite', '--bootstrap', a.addrs[0], '--model', GGUF_PATH, '--swarm-key', K1, '--expires', '1h'],
      30_000,
      home('a')
    )
    const token = inv.stdout.trim()
    // the member's own HOME holds no key: it comes from the token
    joiner = spawn(
      process.execPath,
      [
        CLI,
        'join',
        '--model',
        GGUF_PATH,
        '--num-blocks',
        '2',
        '--check-interval',
        '600000',
        '--kv-dtype',
        'f32',
        '--ephemeral-identity',
        ...FAST
      ],
      { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'], env: { ...home('member'), LAYERSWARM_INVITE: token } }
    )
    createInterface({ input: joiner.stderr! }).on('line', (l) => joinerErr.push(l))
    const serving = await new Promise<Record<string, unknown>>((resolve, reject) => {
      createInterface({ input: joiner!.stdout! }).on('line', (l) => {
        const e = JSON.parse(l) as Record<string, unknown>
        if (e.event === 'serving') resolve(e)
      })
      joiner!.once('exit', (code) => reject(new Error(`join exited ${code}: ${joinerErr.join('\n')}`)))
    })
    expect(serving.layers).toEqual([3, 5])
    expect(joinerErr.join('\n')).not.toContain(token)

    const gen = await cliAsync(
      [
        'generate',
        '--model',
        GGUF_PATH,
        '--invite',
        token,
        '--prompt',
        ref.prompt,
        '--max-tokens',
        '16',
        '--temperature',
        '0',
        '--json'
      ],
      120_000,
      home('client')
    )
    expect(gen.status, gen.stderr).toBe(0)
    const out = JSON.parse(gen.stdout) as { tokens: number[]; report: { routes: Array<Array<{ peerId: string }>> } }
    expect(out.tokens).toEqual(ref.generated_tokens.slice(0, 16))
    // block 3 is served by the joined node only
    expect(out.report.routes.flat().map((h) => h.peerId)).toContain(serving.peerId)
    expect(gen.stderr + gen.stdout).not.toContain(token)
    // `swarm` with the key file sees both members
    const sw = await cliAsync(['swarm', '--bootstrap', a.addrs[0], '--swarm-key', K1, '--json'], 60_000, home('client'))
    expect(sw.status, sw.stderr).toBe(0)
    expect(sw.stdout).toContain(a.peerId)
    expect(sw.stdout).toContain(String(serving.peerId))
  })

  it('a client without the key is refused: one coded line on each side', { timeout: 120_000 }, async () => {
    // a node that refused nobody yet (repeats from one address within a minute are counted into
    // the next line, and every process here dials from 127.0.0.1)
    const c = await startLocalNode({
      model: GGUF_PATH,
      layers: '0:1',
      bootstrap: [a.addrs[0]],
      args: [...FAST, '--swarm-key', K1],
      env: home('c')
    })
    try {
      const r = await cliAsync(
        ['generate', '--model', GGUF_PATH, '--bootstrap', c.addrs[0], '--prompt', 'x', '--max-tokens', '2'],
        90_000,
        home('outsider')
      )
      expect(r.status, r.stderr).toBe(1)
      expect(r.stderr).toMatch(ONE_LINE_ERROR)
      expect(r.stderr).toMatch(/\(SWARM_KEY_MISMATCH\)\n$/)
      expect(r.stderr).toMatch(/--swarm-key/)
      await vi.waitFor(() => expect(coded(c.logs, 'SWARM_KEY_MISMATCH').length).toBe(1), { timeout: 20_000, interval: 100 })
    } finally {
      await c.stop()
    }
  })
})
