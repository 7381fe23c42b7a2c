/**
 * When a serving node should move to other blocks: Petals' rule (Borzunov et al., "Petals",
 * 2023, §3.2; petals/server/block_selection.py `should_choose_other_blocks`). Take our span's
 * throughput out of the per-block totals, find the window we would pick now (span-selection.ts),
 * and move only if putting our throughput there raises the swarm's bottleneck (the lowest
 * per-block total) enough: current / new < balanceQuality. Petals' default quality 0.75 means the
 * bottleneck must rise by more than a third, so nodes do not shuffle over noise in measured
 * throughputs. (Petals also simulates the other servers moving after us; we do not, so a swarm
 * may take a few rounds of different nodes moving to settle.)
 */
import { blockThroughputs, chooseSpan, type ServedSpan } from './span-selection.js'

/** Petals' `balance_quality` default. */
export const DEFAULT_BALANCE_QUALITY = 0.75

export interface MoveDecision {
  /** The span to move to, or undefined to stay. */
  readonly to?: [number, number]
  /** The swarm's bottleneck (tokens/s of its slowest block) now, and after the move. */
  readonly bottleneckNow: number
  readonly bottleneckAfter: number
}

function checkSpan(nBlocks: number, s: ServedSpan, what: string): void {
  if (!(Number.isInteger(s.start) && Number.isInteger(s.end) && s.start >= 0 && s.start < s.end && s.end <= nBlocks))
    throw new RangeError(`${what}: [${s.start}, ${s.end}) is not a span of ${nBlocks} blocks`)
  if (!(Number.isFinite(s.throughput) && s.throughput >= 0))
    throw new RangeError(`${what}: throughput ${s.throughput} is not ≥ 0`)
}

/**
 * Should the node serving `own` move, given what `others` serve (own span excluded)? A swarm
 * with a block nobody serves has bottleneck 0, so any move that covers it is taken.
 */
export function shouldMove(
  nBlocks: number,
  own: ServedSpan,
  others: readonly ServedSpan[],
  balanceQuality = DEFAULT_BALANCE_QUALITY
): MoveDecision {
  if (!Number.isInteger(nBlocks) || nBlocks < 1) throw new RangeError(`nBlocks ${nBlocks} is not a positive integer`)
  if (!(balanceQuality > 0 && balanceQuality <= 1)) throw new RangeError(`balanceQuality ${balanceQuality} is not in (0, 1]`)
  checkSpan(nBlocks, own, 'own span')
  for (const o of others) checkSpan(nBlocks, o, 'a peer span')
  const bottleneckNow = Math.min(...blockThroughputs(nBlocks, [...others, own]))
  const length = own.end - own.start
  const [start, end] = chooseSpan(nBlocks, length, others)
  if (start === own.start) return { bottleneckNow, bottleneckAfter: bottleneckNow }
  const bottleneckAfter = Math.min(...blockThroughputs(nBlocks, [...others, { start, end, throughput: own.throughput }]))
  // Petals: initial / new < quality (and a strictly better bottleneck when it was 0)
  const better = bottleneckNow === 0 ? bottleneckAfter > 0 : bottleneckNow / bottleneckAfter < balanceQuality
  return better ? { to: [start, end], bottleneckNow, bottleneckAfter } : { bottleneckNow, bottleneckAfter }
}
