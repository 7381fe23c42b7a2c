/**
 * The adversary a head peer's checks are measured against (issue #35): a developer's node that
 * rewrites the top-k it seals (`node start --tamper-head`). The daemon's step path has no tamper
 * code: the CLI hands it this transform, as it wraps a tampering Shard.
 *
 * - perturb: adds uniform noise of ±size logits to every returned value (default 2; then ranks again);
 * - swap: reports the second likeliest token as the first and the first as the second (ids swapped,
 *   values kept), which changes every greedy token it touches;
 * - drop: leaves the likeliest token out (the rest move up), so the client never sees it.
 * `rate` is the fraction of replies rewritten (seeded).
 */
import type { HeadRow } from '../shards/index.js'
import { Xorshift64 } from '../shards/index.js'

export const HEAD_TAMPER_MODES = ['perturb', 'swap', 'drop'] as const
export type HeadTamperMode = (typeof HEAD_TAMPER_MODES)[number]

export interface HeadTamperInit {
  readonly mode: HeadTamperMode
  /** perturb: the noise's half-width in logits (default 2). */
  readonly size?: number
  /** Fraction of replies rewritten (default 1). */
  readonly rate?: number
  readonly seed?: number
}

export function createHeadTamper(init: HeadTamperInit): (row: HeadRow) => HeadRow {
  const rng = new Xorshift64(init.seed ?? 1)
  const size = init.size ?? 2
  const rate = init.rate ?? 1
  return (row) => {
    if (rng.nextF32() >= rate || row.ids.length < 2) return row
    const ids = Uint32Array.from(row.ids)
    const values = Float32Array.from(row.values)
    if (init.mode === 'swap') {
      ids[0] = row.ids[1]
      ids[1] = row.ids[0]
      return { ...row, ids, values }
    }
    if (init.mode === 'drop') return { ...row, ids: ids.subarray(1), values: values.subarray(1) }
    for (let i = 0; i < values.length; i++) values[i] += (rng.nextF32() * 2 - 1) * size
    const order = [...ids.keys()].sort((a, b) => values[b] - values[a] || ids[a] - ids[b])
    return { ...row, ids: Uint32Array.from(order, (i) => ids[i]), values: Float32Array.from(order, (i) => values[i]) }
  }
}
