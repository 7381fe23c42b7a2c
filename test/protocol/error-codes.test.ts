import { describe, expect, it } from 'vitest'
import { SnapshotReplayError, UnauthorizedStepError, WeakPublicKeyError } from '../../crypto/errors.js'
import {
  BusyError,
  errorCodeOf,
  errorFromReply,
  errorReplyFor,
  OutOfCacheError,
  RemoteError,
  UnknownSessionError
} from '../../protocol/index.js'
import {
  PositionError,
  OutOfCacheError as ShardOutOfCacheError,
  UnknownSessionError as ShardUnknownSessionError
} from '../../shards/errors.js'

describe('error mapping', () => {
  it('has one class per condition: the engine defines the session and cache errors, the protocol re-exports them', () => {
    expect(UnknownSessionError).toBe(ShardUnknownSessionError)
    expect(OutOfCacheError).toBe(ShardOutOfCacheError)
    expect(new UnknownSessionError('x').code).toBe('UNKNOWN_SESSION')
    expect(new OutOfCacheError('x').code).toBe('OUT_OF_CACHE')
  })

  it('maps errors to codes', () => {
    expect(errorCodeOf(new BusyError('full'))).toBe('BUSY')
    // one dialect: other folders' errors carry the wire names themselves, no translation table
    expect(errorCodeOf(new ShardUnknownSessionError('x'))).toBe('UNKNOWN_SESSION')
    expect(errorCodeOf(new PositionError('x'))).toBe('BAD_POSITION')
    expect(errorCodeOf(new ShardOutOfCacheError('x'))).toBe('OUT_OF_CACHE')
    expect(errorCodeOf(new SnapshotReplayError('x'))).toBe('SNAPSHOT_REPLAY')
    expect(errorCodeOf(new UnauthorizedStepError('x'))).toBe('UNAUTHORIZED')
    expect(errorCodeOf(new WeakPublicKeyError('x'))).toBe('BAD_HOP_KEY')
    expect(errorCodeOf(Object.assign(new Error('x'), { code: 'ERR_OUT_OF_CACHE' }))).toBe('INTERNAL')
    expect(errorCodeOf(Object.assign(new Error('t'), { name: 'InvalidDataLengthError' }))).toBe('TOO_LARGE')
    expect(errorCodeOf(Object.assign(new Error('t'), { name: 'AbortError' }))).toBe('TIMEOUT')
    expect(errorCodeOf(new TypeError('bug'))).toBe('INTERNAL')
    expect(errorCodeOf('string')).toBe('INTERNAL')
  })

  it('turns replies into RemoteErrors and keeps a later hop as the culprit', () => {
    const reply = errorReplyFor(new BusyError('too many sessions'), { peerId: 'me', stepId: 4 })
    expect(reply).toEqual({ code: 'BUSY', message: 'too many sessions', stepId: 4, peerId: 'me' })
    const err = errorFromReply(reply, 9)
    expect(err).toBeInstanceOf(RemoteError)
    expect([err.code, err.peerId, err.stepId, err.requestId]).toEqual(['BUSY', 'me', 4, 9])
    expect(errorReplyFor(err, { peerId: 'hop-1' }).peerId).toBe('me')
    expect(errorReplyFor(new BusyError('x'.repeat(10_000))).message.length).toBe(4096)
    expect(errorReplyFor(new TypeError('/home/secret/path')).message).toBe('internal error (TypeError)')
  })
})
