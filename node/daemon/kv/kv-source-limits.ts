import { KvSourceLimitedError } from '../../../protocol/index.js'

/** Refused transfers a source may cause in one window before it is limited (issue #41 item 4). */
export const KV_SOURCE_REFUSALS = 3
export const KV_SOURCE_WINDOW_MS = 60_000
/** How long a limited source's kv-move streams are refused outright. */
export const KV_SOURCE_LIMITED_MS = 60_000
const MAX_TRACKED_SOURCES = 4096

interface Record_ {
  refusals: number
  windowStartMs: number
  limitedUntilMs: number
}

/**
 * A source that sends KV nobody granted (or a forged, expired, replayed, foreign grant, or a
 * tampered seal) is treated as a hostile peer: each refusal is recorded against its peer id, and
 * after KV_SOURCE_REFUSALS in a window its kv-move streams are refused with KV_SOURCE_LIMITED,
 * before a frame is read, for KV_SOURCE_LIMITED_MS. Bounded (MAX_TRACKED_SOURCES), as the
 * node's other per-peer records.
 */
export class KvSourceLimits {
  private readonly sources = new Map<string, Record_>()

  constructor(private readonly now: () => number = Date.now) {}

  admit(peerId: string): void {
    const r = this.sources.get(peerId)
    if (r && r.limitedUntilMs > this.now())
      throw new KvSourceLimitedError(`KV refused: ${r.refusals} refused transfers from this peer, limited for a while`)
  }

  refused(peerId: string, code: string): number {
    const now = this.now()
    let r = this.sources.get(peerId)
    if (!r || now - r.windowStartMs > KV_SOURCE_WINDOW_MS) {
      if (!r && this.sources.size >= MAX_TRACKED_SOURCES) this.sources.delete(this.sources.keys().next().value as string)
      r = { refusals: 0, windowStartMs: now, limitedUntilMs: 0 }
      this.sources.set(peerId, r)
    }
    // a refusal while limited only keeps the limit going
    if (code !== 'KV_SOURCE_LIMITED') r.refusals++
    if (r.refusals >= KV_SOURCE_REFUSALS) r.limitedUntilMs = now + KV_SOURCE_LIMITED_MS
    return r.refusals
  }

  /** Sources limited now (metrics, tests). */
  limited(): string[] {
    const now = this.now()
    return [...this.sources].filter(([, r]) => r.limitedUntilMs > now).map(([id]) => id)
  }
}
