/**
 * The key file lock (node/identity-lock.ts, issue #31): one running node per key. A live
 * holder's lock is refused, a dead one's is taken over, a parent's (join) counts as ours, and
 * without a named key each claim takes the next free default slot. Real files and real
 * processes (their pids); no mocks.
 */
import { spawnSync } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { IdentityInUseError } from '../../node/errors.js'
import { claimNodeIdentity, identitySlotPath, lockPathOf, pidAlive, tryLockIdentity } from '../../node/identity-lock.js'
import { ROOT } from '../helpers/reference.js'

/** The pid of a process that has exited. */
function deadPid(): number {
  const r = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' })
  const pid = Number(r.stdout)
  expect(pidAlive(pid)).toBe(false)
  return pid
}

describe('identity lock', () => {
  const saved = process.env.LAYERSWARM_HOME
  afterEach(() => {
    process.env.LAYERSWARM_HOME = saved
  })

  it('refuses a key a live process holds; takes over a dead one’s lock', () => {
    const dir = mkdtempSync(join(tmpdir(), 'layerswarm-lock-'))
    const key = join(dir, 'node.key')
    const mine = tryLockIdentity(key)
    expect('lock' in mine).toBe(true)
    expect(readFileSync(lockPathOf(key), 'utf8').trim()).toBe(String(process.pid))
    // held by this (live) process: a second claim is refused, naming the pid
    expect(tryLockIdentity(key)).toEqual({ heldBy: process.pid })
    if ('lock' in mine) mine.lock.release()
    expect(existsSync(lockPathOf(key))).toBe(false)
    // a lock left by a process that died (SIGKILL, a crash) is stale
    writeFileSync(lockPathOf(key), `${deadPid()}\n`, { mode: 0o600 })
    const taken = tryLockIdentity(key)
    expect('lock' in taken && !taken.lock.inherited).toBe(true)
    expect(readFileSync(lockPathOf(key), 'utf8').trim()).toBe(String(process.pid))
    if ('lock' in taken) taken.lock.release()
  })

  it('a named key in use: IDENTITY_IN_USE naming the flags', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'layerswarm-lock-'))
    const key = join(dir, 'node.key')
    const first = await claimNodeIdentity(key)
    const err = await claimNodeIdentity(key).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(IdentityInUseError)
    expect((err as IdentityInUseError).code).toBe('IDENTITY_IN_USE')
    expect((err as Error).message).toMatch(/--identity FILE or --ephemeral-identity/)
    first.lock.release()
    const again = await claimNodeIdentity(key)
    expect(again.identity.peerId).toBe(first.identity.peerId)
    again.lock.release()
  })

  it('without a named key: the next free slot, and a released slot is taken again', async () => {
    const home = mkdtempSync(join(tmpdir(), 'layerswarm-lock-home-'))
    process.env.LAYERSWARM_HOME = home
    const a = await claimNodeIdentity(undefined)
    const b = await claimNodeIdentity(undefined)
    const c = await claimNodeIdentity(undefined)
    expect([a, b, c].map((x) => x.identity.path)).toEqual([
      join(home, 'identity.key'),
      join(home, 'identity-2.key'),
      join(home, 'identity-3.key')
    ])
    expect(new Set([a, b, c].map((x) => x.identity.peerId)).size).toBe(3)
    b.lock.release()
    const b2 = await claimNodeIdentity(undefined)
    expect(b2.identity.path).toBe(join(home, 'identity-2.key'))
    expect(b2.identity.peerId).toBe(b.identity.peerId)
    for (const x of [a, b2, c]) x.lock.release()
    expect(identitySlotPath('/h/identity.key', 7)).toBe('/h/identity-7.key')
  })

  it("a child process takes its parent's lock as its own (join's node start)", () => {
    const dir = mkdtempSync(join(tmpdir(), 'layerswarm-lock-'))
    const key = join(dir, 'node.key')
    const parent = tryLockIdentity(key)
    expect('lock' in parent).toBe(true)
    const script = `import(${JSON.stringify(join(ROOT, 'dist', 'node', 'identity-lock.js'))}).then((m) => { const r = m.tryLockIdentity(${JSON.stringify(key)}); process.stdout.write(JSON.stringify('lock' in r ? { inherited: r.lock.inherited } : r)) })`
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' })
    expect(JSON.parse(r.stdout)).toEqual({ inherited: true })
    // the child's exit does not free the parent's lock
    expect(readFileSync(lockPathOf(key), 'utf8').trim()).toBe(String(process.pid))
    if ('lock' in parent) parent.lock.release()
  })
})
