/**
 * One key file, one running node (issue #31 item 1). Two nodes on one machine used to share
 * `~/.layerswarm/identity.key` silently: one peer id for two processes, so the swarm saw one
 * peer, routes failed with NO_ROUTE and nothing said why. A node now holds a lock on its key
 * file while it runs: `<key>.lock`, holding its pid. A lock whose pid is dead (a node killed
 * with SIGKILL, a crashed machine) is stale and taken over.
 *
 * Without `--identity` a node takes the first key whose lock is free: `identity.key`, then
 * `identity-2.key`, `identity-3.key`, … in the home folder, so three `node start`s on one
 * machine are three peers, and a node restarted while the others run gets its own key back
 * (the first free slot). With `--identity FILE` a key held by a live node is refused
 * (IdentityInUseError), never shared.
 *
 * `join` claims the key for the `node start` child it runs (and restarts on each move): a lock
 * held by this process's parent counts as this process's own.
 */
import { randomBytes } from 'node:crypto'
import { linkSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { basename, dirname, extname, join } from 'node:path'
import type { AbortOptions } from '@libp2p/interface'
import { errorCode } from '../shards/index.js'
import { IdentityInUseError } from './errors.js'
import { defaultIdentityPath, type Identity, loadOrCreateIdentity } from './identity.js'

/** Default key slots tried before giving up (64 nodes on one machine from one home folder). */
export const MAX_IDENTITY_SLOTS = 64

export interface IdentityLock {
  /** The lock file (`<key>.lock`). */
  readonly path: string
  /** True when the lock is the parent's (join's child): releasing it is the parent's job. */
  readonly inherited: boolean
  /** Remove the lock file if it is still ours; safe to call twice. */
  release(): void
}

export interface ClaimedIdentity {
  readonly identity: Identity
  readonly lock: IdentityLock
}

export function lockPathOf(keyPath: string): string {
  return `${keyPath}.lock`
}

/** Is a process with this pid running (one of another user counts: EPERM)? */
export function pidAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false
  try {
    process.kill(pid, 0)
    return true
  } catch (e) {
    return errorCode(e) === 'EPERM'
  }
}

function readHolder(lockPath: string): number | undefined {
  try {
    const n = Number.parseInt(readFileSync(lockPath, 'utf8').trim(), 10)
    return Number.isInteger(n) ? n : undefined
  } catch {
    return undefined
  }
}

const releasers = new Set<() => void>()
let exitHook = false

function makeLock(path: string, inherited: boolean): IdentityLock {
  let released = inherited
  const release = (): void => {
    if (released) return
    released = true
    releasers.delete(release)
    if (readHolder(path) === process.pid) rmSync(path, { force: true })
  }
  if (!inherited) {
    releasers.add(release)
    // a command that ends by an error or process.exit still frees its key for the next start
    if (!exitHook) {
      exitHook = true
      process.once('exit', () => {
        for (const r of [...releasers]) r()
      })
    }
  }
  return { path, inherited, release }
}

/**
 * Take the lock on `keyPath`, or return the pid of the live node holding it. The lock file
 * appears whole (a temporary file linked into place, which fails if one exists).
 */
export function tryLockIdentity(keyPath: string): { lock: IdentityLock } | { heldBy: number } {
  const lockPath = lockPathOf(keyPath)
  mkdirSync(dirname(keyPath), { recursive: true, mode: 0o700 })
  for (let attempt = 0; attempt < 4; attempt++) {
    const tmp = `${lockPath}.${randomBytes(8).toString('hex')}.tmp`
    writeFileSync(tmp, `${process.pid}\n`, { mode: 0o600, flag: 'wx' })
    try {
      linkSync(tmp, lockPath)
      return { lock: makeLock(lockPath, false) }
    } catch (e) {
      if (errorCode(e) !== 'EEXIST') throw e
    } finally {
      rmSync(tmp, { force: true })
    }
    const holder = readHolder(lockPath)
    if (holder === process.ppid) return { lock: makeLock(lockPath, true) }
    if (holder !== undefined && pidAlive(holder)) return { heldBy: holder }
    // stale (its node died without releasing it): move it aside, then try again
    const aside = `${lockPath}.${randomBytes(8).toString('hex')}.stale`
    try {
      renameSync(lockPath, aside)
      rmSync(aside, { force: true })
    } catch {}
  }
  const holder = readHolder(lockPath)
  return { heldBy: holder ?? -1 }
}

/** `identity.key` → `identity-2.key` (slot 2), … */
export function identitySlotPath(first: string, slot: number): string {
  if (slot <= 1) return first
  const ext = extname(first)
  return join(dirname(first), `${basename(first, ext)}-${slot}${ext}`)
}

/**
 * The key a node runs with: `path` (locked, or IdentityInUseError naming the holder's pid), or
 * without one the first free default slot (made on first use).
 */
export async function claimNodeIdentity(path: string | undefined, options: AbortOptions = {}): Promise<ClaimedIdentity> {
  if (path !== undefined) {
    const r = tryLockIdentity(path)
    if ('heldBy' in r)
      throw new IdentityInUseError(
        `identity ${path} is in use by a running node (pid ${r.heldBy}; lock ${lockPathOf(path)}): two nodes on one key are one peer; give this node its own --identity FILE or --ephemeral-identity (without --identity each node gets its own key)`
      )
    try {
      return { identity: await loadOrCreateIdentity(path, options), lock: r.lock }
    } catch (e) {
      r.lock.release()
      throw e
    }
  }
  const first = defaultIdentityPath('node')
  for (let slot = 1; slot <= MAX_IDENTITY_SLOTS; slot++) {
    const keyPath = identitySlotPath(first, slot)
    const r = tryLockIdentity(keyPath)
    if ('heldBy' in r) continue
    try {
      return { identity: await loadOrCreateIdentity(keyPath, options), lock: r.lock }
    } catch (e) {
      r.lock.release()
      throw e
    }
  }
  throw new IdentityInUseError(
    `all ${MAX_IDENTITY_SLOTS} default keys in ${dirname(first)} are in use by running nodes; give this node --identity FILE or --ephemeral-identity`
  )
}
