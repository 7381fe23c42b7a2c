import { describe, expect, it } from 'vitest'
import { BadInviteError, InviteExpiredError } from '../../node/errors.js'
import { decodeInvite, encodeInvite, parseDuration } from '../../node/invite.js'
import { newSwarmKeyText } from '../../protocol/index.js'

// Issue #38: invite tokens round-trip, refuse edits and expiry, and never quote themselves.
const addr = '/ip4/127.0.0.1/tcp/46010/p2p/12D3KooWG4tx7nxPdieQ2pQieSYYvyq8PEEYF4WXqNznwqE683tC'

describe('invite tokens', () => {
  it('round-trip bootstrap, model, key and expiry', () => {
    const swarmKey = newSwarmKeyText()
    const token = encodeInvite({ bootstrap: [addr], modelId: 'lsm1-abc', swarmKey, expiresAtMs: 2_000 })
    expect(token).toMatch(/^lsinv1\.[A-Za-z0-9_-]+$/)
    expect(decodeInvite(token, 1_999)).toEqual({ bootstrap: [addr], modelId: 'lsm1-abc', swarmKey, expiresAtMs: 2_000 })
    expect(decodeInvite(encodeInvite({ bootstrap: [addr], modelId: 'm' }), 1e15)).toEqual({ bootstrap: [addr], modelId: 'm' })
  })

  it('refuses an expired token, a cut one and another format, without quoting it', () => {
    const token = encodeInvite({ bootstrap: [addr], modelId: 'm', swarmKey: newSwarmKeyText(), expiresAtMs: 2_000 })
    expect(() => decodeInvite(token, 2_000)).toThrow(InviteExpiredError)
    for (const bad of [token.slice(0, 30), 'hello', `lsinv1.${Buffer.from('{"v":2}').toString('base64url')}`]) {
      let err: unknown
      try {
        decodeInvite(bad, 0)
      } catch (e) {
        err = e
      }
      expect(err).toBeInstanceOf(BadInviteError)
      expect((err as BadInviteError).code).toBe('BAD_INVITE')
      if (bad.length > 20) expect((err as Error).message).not.toContain(bad.slice(7, 27))
    }
  })

  it('reads durations', () => {
    expect(parseDuration('90s')).toBe(90_000)
    expect(parseDuration('24h')).toBe(86_400_000)
    expect(parseDuration('never')).toBeUndefined()
    expect(parseDuration('soon')).toBeNaN()
  })
})
