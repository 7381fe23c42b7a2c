import { CanaryArgumentError } from './errors.js'

/**
 * Area under the ROC curve of scores of positives (tampered) against negatives (benign): the
 * probability that a random positive scores above a random negative, ties counting ½ (the
 * Mann–Whitney U statistic divided by n₊·n₋).
 */
export function auroc(positives: readonly number[], negatives: readonly number[]): number {
  if (!Array.isArray(positives) || !Array.isArray(negatives) || positives.length === 0 || negatives.length === 0) {
    throw new CanaryArgumentError('auroc needs non-empty lists of positive and negative scores')
  }
  const all = [...positives.map((s) => ({ s, p: 1 })), ...negatives.map((s) => ({ s, p: 0 }))].sort((a, b) => a.s - b.s)
  let rankSum = 0
  for (let i = 0; i < all.length; ) {
    let j = i
    while (j < all.length && all[j].s === all[i].s) j++
    const mid = (i + j + 1) / 2 // average 1-based rank of the tie group
    for (let k = i; k < j; k++) if (all[k].p === 1) rankSum += mid
    i = j
  }
  const n1 = positives.length
  return (rankSum - (n1 * (n1 + 1)) / 2) / (n1 * negatives.length)
}

/** The q-quantile (nearest rank) of a list of numbers. */
export function quantile(values: readonly number[], q: number): number {
  if (!Array.isArray(values) || values.length === 0) throw new CanaryArgumentError('quantile needs a non-empty list')
  if (!(q >= 0 && q <= 1)) throw new CanaryArgumentError('q must be in [0, 1]')
  const s = [...values].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.floor(q * (s.length - 1)))]
}
