import type { SwarmView } from './swarm-view.js'

/**
 * Why no route over [from, to) exists, one line per fact (`--verbose`, `doctor`): each bootstrap
 * address and peer the last refresh tried and what it answered, then the blocks nobody reachable
 * serves.
 */
export function explainMissingRoute(view: SwarmView, from: number, to: number): string[] {
  const r = view.lastRefresh
  const peers = new Map(view.list().map((p) => [p.peerId, p]))
  const lines: string[] = []
  for (const f of r.bootstrapFailed) lines.push(`bootstrap ${f.addr}: ${f.message} (${f.code})`)
  for (const b of r.bootstrapAnnouncements)
    lines.push(
      b.announcements < 0
        ? `bootstrap peer ${b.peerId}: connected, did not answer the announcements request`
        : `bootstrap peer ${b.peerId}: connected, handed over ${b.announcements} announcement(s)`
    )
  for (const d of r.dialled) {
    const p = peers.get(d.peerId)
    if (!d.ok) lines.push(`peer ${d.peerId}: dialled, no answer (${d.error})`)
    else if (r.otherModel.includes(d.peerId)) lines.push(`peer ${d.peerId}: answered, serves another model`)
    else if (p)
      lines.push(`peer ${d.peerId}: answered, serves blocks [${p.start}, ${p.end})${view.isBanned(d.peerId) ? ', banned' : ''}`)
  }
  const covered = new Set(view.coveredBlocks(from, to))
  const missing: number[] = []
  for (let b = from; b < to; b++) if (!covered.has(b)) missing.push(b)
  lines.push(
    missing.length
      ? `blocks [${from}, ${to}) needed from the swarm; nobody reachable serves ${missing.join(', ')}`
      : `blocks [${from}, ${to}) are all served`
  )
  return lines
}
