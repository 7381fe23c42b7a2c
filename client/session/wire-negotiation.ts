/**
 * Wire dtype negotiation (issue 6 §5): which dtype the activations of each hop travel in.
 *
 * Every peer announces (and answers `info` with) the dtypes it accepts. The client asks for
 * `auto` or one dtype:
 * - `auto` takes, per hop, the first of f16, f32, q8_0 the hop accepts. f16 first: it halves
 *   the bytes of f32 and keeps greedy tokens identical on the bundled model (`npm run bench --
 *   wire`); q8_0 (GGUF Q8_0 blocks) only when a hop accepts nothing else, since it drifts more.
 * - an explicit dtype is used on every hop; peers that do not accept it are left out of
 *   routes, and when no route remains the client fails with UnsupportedWireError. No silent
 *   fallback: who asks for f32 wants bit-exact outputs, who asks for q8_0 wants the bytes.
 *
 * A hop's session dtype is the dtype of its input and of its output. In chained forwarding
 * hop i's output is hop i+1's input, so a chain agrees on one dtype every hop accepts.
 */
import { type DType, dtypeFromName, WIRE_DTYPES } from '../../protocol/index.js'
import { InvalidWireError, UnsupportedWireError } from '../errors.js'
import { planRoute, type RouteCandidate, type RouteHop } from '../routing/route.js'

/** What a user asks for: a dtype, or the per-hop choice. */
export type WirePreference = 'auto' | DType

/** What a user may ask for: auto or a dtype (q8_0: GGUF Q8_0 blocks). */
export const WIRE_CHOICES = ['auto', 'f32', 'f16', 'q8_0'] as const

/**
 * Names older versions used, still accepted where users type a dtype (the CLI's --wire, which
 * goes through parseWirePreference / parseWireList). Deprecated: reports and the SDK say q8_0.
 */
export const DEPRECATED_WIRE_NAMES: Readonly<Record<string, DType>> = { int8: 'q8_0' }

/** What the command line accepts for --wire: WIRE_CHOICES and the deprecated names. */
export const WIRE_CLI_CHOICES: readonly string[] = [...WIRE_CHOICES, ...Object.keys(DEPRECATED_WIRE_NAMES)]
export type WireChoice = (typeof WIRE_CHOICES)[number] | 'int8'

/** auto's order of preference (see above). */
export const AUTO_WIRE_ORDER: readonly DType[] = ['f16', 'f32', 'q8_0']

/** Every dtype this version can put on the wire (what a node accepts by default). */
export const ALL_WIRE_DTYPES: readonly DType[] = WIRE_DTYPES

/** A dtype the user typed: f32, f16, q8_0, or a deprecated name (int8); undefined for anything else. */
export function wireDtypeFromName(name: string): DType | undefined {
  return dtypeFromName(name) ?? (Object.hasOwn(DEPRECATED_WIRE_NAMES, name) ? DEPRECATED_WIRE_NAMES[name] : undefined)
}

/** auto or a dtype; the deprecated 'int8' means q8_0. */
export function parseWirePreference(name: string): WirePreference {
  if (name === 'auto') return 'auto'
  const d = wireDtypeFromName(name)
  if (d === undefined)
    throw new InvalidWireError(`wire dtype must be one of ${WIRE_CHOICES.join(', ')}, got ${JSON.stringify(name)}`)
  return d
}

/** A node's `--wire f32,f16,q8_0`: the dtypes it accepts, deduplicated, in the given order. */
export function parseWireList(list: string): DType[] {
  const out: DType[] = []
  for (const name of list
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)) {
    const d = wireDtypeFromName(name)
    if (d === undefined)
      throw new InvalidWireError(`unknown wire dtype ${JSON.stringify(name)}: a node lists what it accepts from f32, f16, q8_0`)
    if (!out.includes(d)) out.push(d)
  }
  if (out.length === 0) throw new InvalidWireError('a node must accept at least one wire dtype')
  return out
}

/** What a peer accepts; an empty list (a peer that announced none) means f32, the proto default. */
export function acceptedDtypes(announced: readonly DType[] | undefined): readonly DType[] {
  return announced && announced.length > 0 ? announced : ['f32']
}

/** The dtype for one hop that accepts `accepted`, or undefined if it accepts none that fits. */
export function pickWire(preference: WirePreference, accepted: readonly DType[] | undefined): DType | undefined {
  const ok = acceptedDtypes(accepted)
  if (preference !== 'auto') return ok.includes(preference) ? preference : undefined
  return AUTO_WIRE_ORDER.find((d) => ok.includes(d))
}

export interface WireHop {
  readonly peerId: string
  readonly wireDtypes?: readonly DType[]
}

/**
 * The dtype of every hop of a route: per hop relayed, one for the whole chain chained.
 * Throws UnsupportedWireError naming the hops that accept nothing that fits.
 */
export function negotiateWire(preference: WirePreference, hops: readonly WireHop[], chained: boolean): DType[] {
  if (chained && hops.length > 1) {
    const order = preference === 'auto' ? AUTO_WIRE_ORDER : [preference]
    const common = order.find((d) => hops.every((h) => acceptedDtypes(h.wireDtypes).includes(d)))
    if (common === undefined) {
      const lists = hops.map((h) => `${h.peerId}: ${acceptedDtypes(h.wireDtypes).join(',')}`).join('; ')
      throw new UnsupportedWireError(
        `the hops of a chain must share a wire dtype (${preference === 'auto' ? 'any' : preference}), they accept ${lists}`
      )
    }
    return hops.map(() => common)
  }
  return hops.map((h) => {
    const d = pickWire(preference, h.wireDtypes)
    if (d === undefined) {
      const accepted = acceptedDtypes(h.wireDtypes).join(',')
      throw new UnsupportedWireError(
        `hop ${h.peerId} accepts wire ${accepted}, not ${preference === 'auto' ? 'auto' : preference}`
      )
    }
    return d
  })
}

/** Route filter: can this peer carry `preference` at all (auto: always, every peer accepts something auto takes). */
export function acceptsWire(preference: WirePreference, accepted: readonly DType[] | undefined): boolean {
  return pickWire(preference, accepted) !== undefined
}

export interface WireCandidate extends RouteCandidate {
  readonly wireDtypes?: readonly DType[]
}

/**
 * planRoute over the peers that accept the requested dtype, with each hop's negotiated dtype.
 * Chained with auto, the fastest route may share no dtype: then the fastest route over the
 * peers that accept each dtype in auto's order. UnsupportedWireError when peers cover the span
 * but not with an acceptable dtype; NoRouteError when nobody covers it.
 */
export function planWireRoute(
  candidates: readonly WireCandidate[],
  from: number,
  to: number,
  preference: WirePreference,
  chained: boolean
): Array<RouteHop & { wireDtype: DType }> {
  const fits = (d: WirePreference) => candidates.filter((p) => acceptsWire(d, p.wireDtypes))
  const withDtypes = (hops: RouteHop[]) => {
    const dtypes = negotiateWire(
      preference,
      hops.map((h) => candidates.find((c) => c.peerId === h.peerId)!),
      chained
    )
    return hops.map((h, i) => ({ ...h, wireDtype: dtypes[i] }))
  }
  let hops: RouteHop[]
  try {
    hops = planRoute(fits(preference), from, to)
  } catch (err) {
    planRoute(candidates, from, to) // nobody covers the span: that NoRouteError is the one to report
    const left = candidates.filter((p) => !acceptsWire(preference, p.wireDtypes))
    const lists = left.map((p) => `${p.peerId} [${p.start}, ${p.end}) accepts ${acceptedDtypes(p.wireDtypes).join(',')}`)
    throw new UnsupportedWireError(
      `no route over blocks [${from}, ${to}) accepts wire ${preference === 'auto' ? 'auto' : preference}: ${lists.join('; ')} (${(err as Error).message})`
    )
  }
  try {
    return withDtypes(hops)
  } catch (err) {
    if (!(chained && preference === 'auto')) throw err
    for (const d of AUTO_WIRE_ORDER) {
      try {
        return withDtypes(planRoute(fits(d), from, to))
      } catch {}
    }
    throw err
  }
}
