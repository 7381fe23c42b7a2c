/**
 * Invite tokens (issue #38): what a new member needs to join a swarm, in one string to paste.
 * `lsinv1.` + base64url of a JSON object: bootstrap multiaddrs, the model id, optionally the
 * swarm key (then the token is a secret: whoever holds it holds the key) and an expiry.
 *
 * The expiry is checked by the command that reads the token (an honest member never joins on a
 * stale invite); it does not revoke the key a token carried. To shut out holders of old
 * tokens, make a new key (`layerswarm swarm-key new`) and restart the swarm on it
 * (docs/networking.md).
 */
import { BadInviteError, InviteExpiredError } from './errors.js'

const PREFIX = 'lsinv1.'

export interface Invite {
  readonly bootstrap: readonly string[]
  readonly modelId: string
  /** The swarm key file's text (protocol/swarm-key.ts), when the swarm is private. */
  readonly swarmKey?: string
  /** Unix milliseconds after which the token is refused; none: it never expires. */
  readonly expiresAtMs?: number
}

interface Wire {
  v: 1
  b: string[]
  m: string
  k?: string
  e?: number
}

export function encodeInvite(invite: Invite): string {
  const wire: Wire = { v: 1, b: [...invite.bootstrap], m: invite.modelId }
  if (invite.swarmKey !== undefined) wire.k = invite.swarmKey
  if (invite.expiresAtMs !== undefined) wire.e = invite.expiresAtMs
  return PREFIX + Buffer.from(JSON.stringify(wire), 'utf8').toString('base64url')
}

/** Decode and check a token; BadInviteError / InviteExpiredError (messages never quote the token). */
export function decodeInvite(token: string, nowMs = Date.now()): Invite {
  const t = token.trim()
  if (!t.startsWith(PREFIX))
    throw new BadInviteError(`an invite token starts with ${PREFIX} (copy the whole line \`layerswarm invite\` printed)`)
  let wire: Partial<Wire>
  try {
    wire = JSON.parse(Buffer.from(t.slice(PREFIX.length), 'base64url').toString('utf8')) as Partial<Wire>
  } catch {
    throw new BadInviteError('the invite token does not decode (cut short or edited?)')
  }
  if (
    typeof wire !== 'object' ||
    wire === null ||
    wire.v !== 1 ||
    !Array.isArray(wire.b) ||
    wire.b.length === 0 ||
    !wire.b.every((a) => typeof a === 'string' && a.startsWith('/')) ||
    typeof wire.m !== 'string' ||
    (wire.k !== undefined && typeof wire.k !== 'string') ||
    (wire.e !== undefined && !Number.isFinite(wire.e))
  )
    throw new BadInviteError('the invite token is not a layerswarm v1 invite (bootstrap addresses and model id expected)')
  if (wire.e !== undefined && wire.e <= nowMs)
    throw new InviteExpiredError(
      `the invite expired at ${new Date(wire.e).toISOString()}; ask for a new one (\`layerswarm invite\`)`
    )
  return {
    bootstrap: wire.b,
    modelId: wire.m,
    ...(wire.k !== undefined ? { swarmKey: wire.k } : {}),
    ...(wire.e !== undefined ? { expiresAtMs: wire.e } : {})
  }
}

/** "90s", "30m", "24h", "7d", or "never" → milliseconds (undefined for never); NaN when unreadable. */
export function parseDuration(text: string): number | undefined {
  if (text === 'never') return undefined
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/.exec(text.trim())
  if (!m) return Number.NaN
  const unit = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 }[m[2] as 'ms' | 's' | 'm' | 'h' | 'd']
  return Number(m[1]) * unit
}
