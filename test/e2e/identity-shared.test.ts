/**
 * Issue #31 item 1: several nodes on one machine, started as the README starts one (no identity
 * flag, one home folder), are several peers: each takes its own key (identity.key,
 * identity-2.key, …), so a swarm of three serves and every generation through one bootstrap
 * address gives one process's tokens. A key file a running node holds is refused to a second
 * one with one coded line; `doctor` flags two addresses answering with one peer id; a node
 * bootstrapping to its own peer id is told so (DUPLICATE_PEER_ID), not "restarted with a new
 * identity". Real node processes on 127.0.0.1, the real CLI and SDK.
 */
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { copyFileSync, existsSync, mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { createClient } from '../../client/index.js'
import { createReferenceKernels } from '../../shards/index.js'
import { CLI } from '../helpers/cli.js'
import { cliAsync, ONE_LINE_ERROR } from '../helpers/cli-async.js'
import { type ReadmeNode, startReadmeNode } from '../helpers/readme-node.js'
import { GGUF_PATH, ROOT } from '../helpers/reference.js'

const LISTEN = ['--listen', '/ip4/127.0.0.1/tcp/0']
const PROMPT = 'Once upon a time'
const TOKENS = 16

describe('nodes on one machine, started as the README shows', () => {
  const nodes: ReadmeNode[] = []
  afterAll(async () => {
    await Promise.all(nodes.map((n) => n.stop()))
  })

  it('three nodes in one home are three peers; 30/30 generations through one bootstrap address', {
    timeout: 300_000
  }, async () => {
    const home = mkdtempSync(join(tmpdir(), 'layerswarm-shared-home-'))
    const first = await startReadmeNode(home, ['--layers', '0:2', ...LISTEN])
    nodes.push(first)
    const boot = first.addrs[0]
    const second = await startReadmeNode(home, ['--layers', '2:5', ...LISTEN, '--bootstrap', boot])
    nodes.push(second)
    const third = await startReadmeNode(home, ['--layers', '2:5', ...LISTEN, '--bootstrap', boot])
    nodes.push(third)
    expect(new Set(nodes.map((n) => n.peerId)).size).toBe(3)
    expect(nodes.map((n) => n.identity)).toEqual([
      join(home, 'identity.key'),
      join(home, 'identity-2.key'),
      join(home, 'identity-3.key')
    ])
    for (const n of nodes) expect(n.stderr.join('\n')).not.toMatch(/BOOTSTRAP_PEER_ID|DUPLICATE_PEER_ID/)

    // one process's tokens: the whole model here
    const local = await cliAsync(
      ['generate', '--prompt', PROMPT, '--max-tokens', String(TOKENS), '--temperature', '0', '--json'],
      120_000
    )
    expect(local.status, local.stderr).toBe(0)
    const want = (JSON.parse(local.stdout) as { tokens: number[] }).tokens

    const client = await createClient({ bootstrap: [boot], model: GGUF_PATH, kernels: createReferenceKernels() })
    const got: number[][] = []
    try {
      for (let i = 0; i < 30; i++) got.push((await client.generate(PROMPT, { maxTokens: TOKENS, temperature: 0 })).tokens)
    } finally {
      await client.close()
    }
    expect(got.filter((t) => JSON.stringify(t) === JSON.stringify(want)).length).toBe(30)

    // the second node restarted (the others still running) gets its own key back: same peer id
    await second.stop('SIGTERM')
    nodes.splice(nodes.indexOf(second), 1)
    const again = await startReadmeNode(home, ['--layers', '2:5', ...LISTEN, '--bootstrap', boot])
    nodes.push(again)
    expect(again.peerId).toBe(second.peerId)
    expect(again.identity).toBe(join(home, 'identity-2.key'))
  })

  it('two joins in one home beside a node are two more peers, each on its own key', { timeout: 180_000 }, async () => {
    const home = mkdtempSync(join(tmpdir(), 'layerswarm-shared-join-'))
    const boot = await startReadmeNode(home, ['--layers', '0:3', ...LISTEN])
    nodes.push(boot)
    const joins = [0, 1].map(() =>
      spawn(process.execPath, [CLI, 'join', '--bootstrap', boot.addrs[0], ...LISTEN, '--num-blocks', '2'], {
        cwd: ROOT,
        env: { ...process.env, LAYERSWARM_HOME: home },
        stdio: ['ignore', 'pipe', 'pipe']
      })
    )
    try {
      const serving = await Promise.all(
        joins.map(
          (j) =>
            new Promise<{ peerId: string }>((resolve, reject) => {
              let out = ''
              let err = ''
              j.stderr!.on('data', (d) => (err += d))
              j.stdout!.on('data', (d) => {
                out += d
                const line = out.split('\n').find((l) => l.includes('"serving"'))
                if (line) resolve(JSON.parse(line))
              })
              j.once('exit', (code) => reject(new Error(`join exited with ${code}: ${err}`)))
            })
        )
      )
      expect(new Set([boot.peerId, ...serving.map((s) => s.peerId)]).size).toBe(3)
    } finally {
      await Promise.all(
        joins.map(async (j) => {
          if (j.exitCode !== null) return
          const exited = once(j, 'exit')
          j.kill('SIGTERM')
          await exited
        })
      )
    }
    // each join freed its key on leaving: only the node's lock is left
    expect(existsSync(join(home, 'identity-2.key.lock'))).toBe(false)
    expect(existsSync(join(home, 'identity-3.key.lock'))).toBe(false)
    expect(existsSync(join(home, 'identity.key.lock'))).toBe(true)
  })

  it('a key a running node holds is refused to a second one, in one coded line', { timeout: 120_000 }, async () => {
    const home = mkdtempSync(join(tmpdir(), 'layerswarm-shared-key-'))
    const key = join(home, 'mine.key')
    const holder = await startReadmeNode(home, ['--layers', '0:2', ...LISTEN, '--identity', key])
    nodes.push(holder)
    expect(existsSync(`${key}.lock`)).toBe(true)
    const r = await cliAsync(['node', 'start', '--layers', '2:5', ...LISTEN, '--identity', key], 60_000, {
      ...process.env,
      LAYERSWARM_HOME: home
    })
    expect(r.status).toBe(1)
    expect(r.stderr).toMatch(ONE_LINE_ERROR)
    expect(r.stderr).toContain('(IDENTITY_IN_USE)')
    expect(r.stderr).toContain('--identity')
    expect(r.stderr).toContain('--ephemeral-identity')
    expect(r.stderr).toContain(`pid ${holder.process.pid}`)
    // once the holder is gone (even killed, leaving a stale lock), the key is free again
    holder.process.kill('SIGKILL')
    await holder.stop()
    nodes.splice(nodes.indexOf(holder), 1)
    const next = await startReadmeNode(home, ['--layers', '0:2', ...LISTEN, '--identity', key])
    nodes.push(next)
    expect(next.peerId).toBe(holder.peerId)
  })

  it('doctor flags two addresses answering with one peer id; a self-bootstrap says DUPLICATE_PEER_ID', {
    timeout: 180_000
  }, async () => {
    // one key copied to two places (a key file copied to a second machine, or a second home)
    const home = mkdtempSync(join(tmpdir(), 'layerswarm-dup-'))
    const keyA = join(home, 'a.key')
    const keyB = join(home, 'b.key')
    const a = await startReadmeNode(home, ['--layers', '0:2', ...LISTEN, '--identity', keyA])
    nodes.push(a)
    copyFileSync(keyA, keyB)
    const b = await startReadmeNode(home, ['--layers', '2:5', ...LISTEN, '--identity', keyB, '--bootstrap', a.addrs[0]])
    nodes.push(b)
    expect(b.peerId).toBe(a.peerId)
    // libp2p refuses to dial its own id: that is a duplicate, not a restart with a new key
    const warning = b.stderr.find((l) => l.includes('layerswarm: warning:'))
    expect(warning).toContain('(DUPLICATE_PEER_ID)')
    expect(warning).not.toContain('restarted')

    const r = await cliAsync(['doctor', '--bootstrap', `${a.addrs[0]},${b.addrs[0]}`], 90_000)
    expect(r.status, r.stdout).not.toBe(0)
    const line = r.stdout.split('\n').find((l) => l.startsWith('FAIL  identity'))
    expect(line, r.stdout).toContain(`duplicated peer id ${a.peerId}`)
    expect(line).toContain('--identity')
  })
})
