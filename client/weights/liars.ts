import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

/*
 * Issue 33: peers that served bytes that do not hash to the content id. Kept in the store's
 * liars.json so a later fetch (a restart, another span) never asks them again.
 */

export interface LiarRecord {
  readonly peerId: string
  /** `manifest`, or `chunk N (tensor)`. */
  readonly what: string
  readonly reason: string
  readonly atMs: number
}

/** The liars recorded in a store folder. */
export function readLiars(storeDir: string): LiarRecord[] {
  const p = join(storeDir, 'liars.json')
  if (!existsSync(p)) return []
  try {
    return JSON.parse(readFileSync(p, 'utf8')) as LiarRecord[]
  } catch {
    return []
  }
}

/** Peer ids recorded as liars in a store folder. */
export function savedLiars(storeDir: string): Set<string> {
  return new Set(readLiars(storeDir).map((l) => l.peerId))
}

export function recordLiars(storeDir: string, liars: readonly LiarRecord[]): void {
  if (liars.length === 0) return
  mkdirSync(storeDir, { recursive: true })
  writeFileSync(join(storeDir, 'liars.json'), JSON.stringify([...readLiars(storeDir), ...liars], null, 1))
}
