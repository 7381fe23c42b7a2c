/*
 * What two colluding peers on one route can tell of a client's steps (issue #39, items 3 and 4):
 * each logs every request it gets (`request` trace events: session id, arrival time, sizes,
 * order), they pool their logs, and simple classifiers label each step they saw real or decoy.
 * The accuracy is balanced (the mean of the two classes' recalls), so chance is 0.5 whatever the
 * share of decoys; each classifier's free parameter (a threshold, a direction, a label per cell)
 * is the best one on the very steps it is scored on, which favours the attacker.
 */

/** One step request as a peer saw it. */
export interface SeenStep {
  /** Which of the colluding peers saw it. */
  readonly peer: string
  /** Arrival, ms (the peer's log clock). */
  readonly atMs: number
  readonly sessionId: string
  readonly bytes: number
  /** Whether it was a real step (the client's log says; the peers do not know). */
  readonly real: boolean
}

/** The best accuracy of each kind of classifier. */
export interface CollusionScores {
  /** By ids: a session id both peers saw is real. */
  readonly ids: number
  /** By timing: a threshold on the gap since the previous step at the same peer, until the next, or the nearer of the two. */
  readonly timing: number
  /** By sizes: each step size labelled with its likelier class. */
  readonly sizes: number
  /** By order: each (opens a cluster, closes a cluster) cell labelled with its likelier class. */
  readonly order: number
  readonly realSteps: number
  readonly decoySteps: number
}

/** Balanced accuracy of labelling `predictReal` for each sample. */
function balanced(samples: readonly SeenStep[], predictReal: (s: SeenStep, i: number) => boolean): number {
  let realHit = 0
  let decoyHit = 0
  let real = 0
  samples.forEach((s, i) => {
    const p = predictReal(s, i)
    if (s.real) {
      real++
      if (p) realHit++
    } else if (!p) decoyHit++
  })
  const decoy = samples.length - real
  if (real === 0 || decoy === 0) return 0.5
  return (realHit / real + decoyHit / decoy) / 2
}

/** The better of a rule and its opposite. */
function eitherWay(samples: readonly SeenStep[], rule: (s: SeenStep, i: number) => boolean): number {
  const a = balanced(samples, rule)
  return Math.max(a, 1 - a)
}

/** Best balanced accuracy of a threshold on a feature, in either direction. */
function bestThreshold(samples: readonly SeenStep[], feature: readonly number[]): number {
  const cuts = [...new Set(feature)].sort((a, b) => a - b)
  let best = 0.5
  for (const c of cuts)
    best = Math.max(
      best,
      eitherWay(samples, (_, i) => feature[i] <= c)
    )
  return best
}

/** Best balanced accuracy of labelling each value of a categorical feature with its likelier class. */
function bestPerValue(samples: readonly SeenStep[], key: readonly string[]): number {
  const real = samples.filter((s) => s.real).length
  const decoy = samples.length - real
  if (real === 0 || decoy === 0) return 0.5
  const weight = new Map<string, number>()
  samples.forEach((s, i) => {
    weight.set(key[i], (weight.get(key[i]) ?? 0) + (s.real ? 1 / real : -1 / decoy))
  })
  return balanced(samples, (_, i) => (weight.get(key[i]) ?? 0) > 0)
}

/** Gaps (ms) before and after each step at its own peer; Infinity at a peer's first or last step. */
function gaps(samples: readonly SeenStep[]): { before: number[]; after: number[] } {
  const before = new Array<number>(samples.length).fill(Number.POSITIVE_INFINITY)
  const after = new Array<number>(samples.length).fill(Number.POSITIVE_INFINITY)
  const byPeer = new Map<string, number[]>()
  samples.forEach((s, i) => {
    byPeer.set(s.peer, [...(byPeer.get(s.peer) ?? []), i])
  })
  for (const idx of byPeer.values()) {
    idx.sort((a, b) => samples[a].atMs - samples[b].atMs || a - b)
    for (let k = 1; k < idx.length; k++) {
      const g = samples[idx[k]].atMs - samples[idx[k - 1]].atMs
      before[idx[k]] = g
      after[idx[k - 1]] = g
    }
  }
  return { before, after }
}

/** Score every classifier on the steps two colluding peers saw. */
export function scoreCollusion(samples: readonly SeenStep[], clusterMs = 5): CollusionScores {
  const peersOf = new Map<string, Set<string>>()
  for (const s of samples) peersOf.set(s.sessionId, (peersOf.get(s.sessionId) ?? new Set()).add(s.peer))
  const ids = eitherWay(samples, (s) => (peersOf.get(s.sessionId)?.size ?? 0) > 1)
  const { before, after } = gaps(samples)
  const nearest = before.map((b, i) => Math.min(b, after[i]))
  const timing = Math.max(bestThreshold(samples, before), bestThreshold(samples, after), bestThreshold(samples, nearest))
  const sizes = bestPerValue(
    samples,
    samples.map((s) => String(s.bytes))
  )
  const order = bestPerValue(
    samples,
    samples.map((_, i) => `${before[i] > clusterMs}/${after[i] > clusterMs}`)
  )
  const realSteps = samples.filter((s) => s.real).length
  return { ids, timing, sizes, order, realSteps, decoySteps: samples.length - realSteps }
}

/** A node's `request` trace lines (JSON, `--log-level trace`) as steps, labelled by the real sessions' hop ids. */
export function stepsSeen(peer: string, logLines: readonly string[], realIds: ReadonlySet<string>): SeenStep[] {
  const out: SeenStep[] = []
  for (const line of logLines) {
    let e: { msg?: string; type?: string; sessionId?: string; bytes?: number; time?: string | number }
    try {
      e = JSON.parse(line)
    } catch {
      continue
    }
    if (e.msg !== 'request' || e.type !== 'step' || e.sessionId === undefined) continue
    const atMs = typeof e.time === 'number' ? e.time : Date.parse(String(e.time))
    out.push({ peer, atMs, sessionId: e.sessionId, bytes: e.bytes ?? 0, real: realIds.has(e.sessionId) })
  }
  return out
}
