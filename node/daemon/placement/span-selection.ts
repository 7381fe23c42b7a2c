/**
 * Petals' block selection (Borzunov et al., "Petals", 2023, §3.2; petals/server/block_selection.py):
 * a joining server computes each block's total throughput over the servers that hold it and
 * takes the window of `numBlocks` consecutive blocks whose bottleneck (lowest total) is lowest,
 * so it raises the swarm's slowest part. Ties go to the earliest window.
 */
export interface ServedSpan {
  readonly start: number
  readonly end: number
  readonly throughput: number
}

export function blockThroughputs(nBlocks: number, spans: readonly ServedSpan[]): number[] {
  const t = new Array<number>(nBlocks).fill(0)
  for (const s of spans) for (let b = Math.max(0, s.start); b < Math.min(nBlocks, s.end); b++) t[b] += s.throughput
  return t
}

export function chooseSpan(nBlocks: number, numBlocks: number, spans: readonly ServedSpan[]): [number, number] {
  const n = Math.max(1, Math.min(nBlocks, Math.floor(numBlocks)))
  const t = blockThroughputs(nBlocks, spans)
  let best = 0
  let bestKey: [number, number] = [Number.POSITIVE_INFINITY, Number.POSITIVE_INFINITY]
  for (let s = 0; s + n <= nBlocks; s++) {
    const window = t.slice(s, s + n)
    // lowest bottleneck first, then lowest total (Petals sorts by the window's throughputs)
    const key: [number, number] = [Math.min(...window), window.reduce((a, b) => a + b, 0)]
    if (key[0] < bestKey[0] || (key[0] === bestKey[0] && key[1] < bestKey[1])) {
      best = s
      bestKey = key
    }
  }
  return [best, best + n]
}
