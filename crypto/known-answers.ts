/**
 * Known-answer checks of an AsyncPrimitives implementation: X25519 outputs and low-order
 * refusals, AES-GCM seal outputs, opens, and a flipped tag bit refused. The vectors are passed in
 * (test/vectors/crypto-kat.json), so the same file checks node:crypto in Node and WebCrypto in a
 * browser; the browser client's worker runs it on request (client/browser/worker.ts `kat`).
 */
import type { AsyncPrimitives } from './async-primitives.js'
import { TagMismatchError, WeakPublicKeyError } from './errors.js'

export interface KnownAnswerVectors {
  readonly x25519: ReadonlyArray<{ scalar: string; u: string; out: string }>
  readonly x25519LowOrder: readonly string[]
  readonly gcm: ReadonlyArray<{ key: string; nonce: string; aad?: string; plaintext: string; sealed: string }>
}

const fromHex = (s: string): Uint8Array => Uint8Array.from(s.match(/../g) ?? [], (h) => Number.parseInt(h, 16))
const toHex = (b: Uint8Array): string => Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('')

async function throws(f: () => Promise<unknown>, type: new (...a: never[]) => Error): Promise<boolean> {
  try {
    await f()
    return false
  } catch (err) {
    return err instanceof type
  }
}

/** The checks that failed (empty: every vector passed). */
export async function checkKnownAnswers(p: AsyncPrimitives, v: KnownAnswerVectors): Promise<string[]> {
  const failed: string[] = []
  for (const [i, t] of v.x25519.entries()) {
    const out = toHex(await p.x25519(fromHex(t.scalar), fromHex(t.u)).catch(() => new Uint8Array(0)))
    if (out !== t.out) failed.push(`${p.name} x25519 #${i}: ${out}`)
  }
  for (const [i, u] of v.x25519LowOrder.entries()) {
    if (!(await throws(() => p.x25519(fromHex(v.x25519[0].scalar), fromHex(u)), WeakPublicKeyError)))
      failed.push(`${p.name} x25519 low-order #${i} accepted`)
  }
  for (const [i, t] of v.gcm.entries()) {
    const key = fromHex(t.key)
    const nonce = fromHex(t.nonce)
    const aad = t.aad !== undefined ? fromHex(t.aad) : undefined
    const sealed = toHex(await p.aesGcmSeal(key, nonce, fromHex(t.plaintext), aad))
    if (sealed !== t.sealed) failed.push(`${p.name} gcm seal #${i}: ${sealed}`)
    const opened = toHex(await p.aesGcmOpen(key, nonce, fromHex(t.sealed), aad).catch(() => new Uint8Array([0xff])))
    if (opened !== t.plaintext) failed.push(`${p.name} gcm open #${i}`)
    const bad = fromHex(t.sealed)
    bad[bad.length - 1] ^= 1
    if (!(await throws(() => p.aesGcmOpen(key, nonce, bad, aad), TagMismatchError)))
      failed.push(`${p.name} gcm #${i} bad tag accepted`)
  }
  return failed
}
