/**
 * Requests for test/e2e/hostile.test.ts: builders for well-formed session requests, and the
 * tables of malformed ones with the typed code each must be refused with.
 */
import { DEFAULT_MAX_MESSAGE_BYTES, type SessionRequestBody, type Tensor } from '../../protocol/index.js'
import { garbage, type RawSession, varint } from './raw-session.js'

export interface OpenOptions {
  modelId: string
  start: number
  end: number
  maxLength?: number
  upstream?: string
}

export const openBody = (sessionId: string, o: OpenOptions) =>
  ({
    type: 'open',
    open: {
      sessionId,
      modelId: o.modelId,
      start: o.start,
      end: o.end,
      maxLength: o.maxLength ?? 8,
      wireDtype: 'f32',
      nextHops: [],
      ...(o.upstream ? { upstreamPeerId: o.upstream } : {})
    }
  }) satisfies SessionRequestBody

export const stepBody = (sessionId: string, stepId: number, startPosition: number, hidden: Tensor, chain = false) =>
  ({ type: 'step', step: { sessionId, stepId, startPosition, hidden, chain } }) satisfies SessionRequestBody

export const awaitBody = (sessionId: string, stepId: number) =>
  ({ type: 'await', await: { sessionId, stepId } }) satisfies SessionRequestBody

/** A tensor as a peer could claim it: any shape, dtype and bytes (the encoder checks only lengths). */
export const claimedTensor = (shape: number[], data: Uint8Array, dtype: Tensor['dtype'] = 'f32'): Tensor => ({
  shape,
  dtype,
  data
})

/**
 * Frames that lose the framing or cannot be parsed at all: each must be answered with a
 * request_id 0 error, after which the node ends the stream. [what, send, code]
 */
export const STREAM_CASES: Array<[string, (raw: RawSession) => Promise<void>, string]> = [
  // field 15 with wire type 7, which does not exist: no protobuf decoder can read past it
  ['garbage', (raw) => raw.sendFrame(Uint8Array.of(0x7f, ...garbage(256, 7))), 'MALFORMED'],
  ['request_id 0', (raw) => raw.send({ requestId: 0, close: { sessionId: 'legit-session' } }), 'MALFORMED'],
  [
    'length prefix past the cap',
    async (raw) => raw.sendRaw(Uint8Array.of(...varint(DEFAULT_MAX_MESSAGE_BYTES + 1), ...garbage(4096, 9))),
    'TOO_LARGE'
  ],
  ['endless length prefix', async (raw) => raw.sendRaw(new Uint8Array(16).fill(0x80)), 'TOO_LARGE'],
  [
    'truncated frame',
    async (raw) => {
      raw.sendRaw(Uint8Array.of(100, 1, 2, 3)) // announces 100 bytes, sends 3, ends
      await raw.close()
    },
    'MALFORMED'
  ]
]

/**
 * Requests whose request_id parses but whose fields do not: each gets an ErrorReply for its own
 * request_id and the stream keeps serving. Steps target `sessionId`, open on the node. [what, wire body, code]
 */
export function fieldCases(
  sessionId: string,
  open: OpenOptions,
  row: Uint8Array,
  dim: number
): Array<[string, Record<string, unknown>, string]> {
  const wireOpen = { ...openBody('atk-x', open).open, wireDtype: 0 }
  const wireStep = (hidden: Record<string, unknown> | undefined, extra: Record<string, unknown> = {}) => ({
    step: { sessionId, stepId: 1, startPosition: 0, hidden, ...extra }
  })
  const ok = { shape: [1, dim], dtype: 0, data: row }
  return [
    ['no body', {}, 'MALFORMED'],
    ['empty session id', { close: { sessionId: '' } }, 'MALFORMED'],
    ['session id with spaces', { close: { sessionId: 'a b' } }, 'MALFORMED'],
    ['session id of 200 characters', { close: { sessionId: 'x'.repeat(200) } }, 'MALFORMED'],
    ['empty span', { open: { ...wireOpen, start: 2, end: 2 } }, 'BAD_SPAN'],
    ['span past the protocol cap', { open: { ...wireOpen, end: 2 ** 20 } }, 'BAD_SPAN'],
    ['zero max length', { open: { ...wireOpen, maxLength: 0 } }, 'MALFORMED'],
    ['unknown wire dtype', { open: { ...wireOpen, wireDtype: 9 } }, 'MALFORMED'],
    ['empty model id', { open: { ...wireOpen, modelId: '' } }, 'MALFORMED'],
    ['65 next hops', { open: { ...wireOpen, nextHops: Array(65).fill({ peerId: 'p', start: 1, end: 2 }) } }, 'MALFORMED'],
    ['step id past 2^53', wireStep(ok, { stepId: 2 ** 60 }), 'MALFORMED'],
    ['position past the protocol cap', wireStep(ok, { startPosition: 2 ** 31 }), 'MALFORMED'],
    ['missing tensor', wireStep(undefined), 'MALFORMED'],
    ['unknown tensor dtype', wireStep({ ...ok, dtype: 7 }), 'MALFORMED'],
    ['rank 0', wireStep({ ...ok, shape: [] }), 'BAD_SHAPE'],
    ['rank 5', wireStep({ ...ok, shape: [1, 1, 1, 1, dim] }), 'MALFORMED'],
    ['zero dimension', wireStep({ ...ok, shape: [0, dim], data: new Uint8Array(0) }), 'BAD_SHAPE'],
    ['4G x dim claimed with one row of data', wireStep({ ...ok, shape: [0xffffffff, dim] }), 'TOO_LARGE'],
    ['2^16 x 2^16 x 2^16 claimed', wireStep({ ...ok, shape: [65536, 65536, 65536] }), 'TOO_LARGE'],
    ['data shorter than the shape', wireStep({ ...ok, shape: [2, dim] }), 'MALFORMED'],
    ['data longer than the shape', wireStep({ ...ok, shape: [1, dim / 2] }), 'MALFORMED'],
    ['await of step id past 2^53', { awaitResult: { sessionId, stepId: 2 ** 55 } }, 'MALFORMED'],
    ['audit of no step', { awaitResults: { sessionId, stepIds: [] } }, 'MALFORMED'],
    ['audit of 9 steps (a hop keeps 8)', { awaitResults: { sessionId, stepIds: [1, 2, 3, 4, 5, 6, 7, 8, 9] } }, 'MALFORMED'],
    ['audit of step id past 2^53', { awaitResults: { sessionId, stepIds: [2 ** 55] } }, 'MALFORMED']
  ]
}
