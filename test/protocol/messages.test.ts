import { describe, expect, it } from 'vitest'
import {
  BadSpanError,
  DTYPE_VALUES,
  decodeInfoRequest,
  decodeInfoResponse,
  decodeSessionRequest,
  decodeSessionResponse,
  decodeTensorMessage,
  ErrorCode,
  encodeInfoRequest,
  encodeInfoResponse,
  encodeSessionRequest,
  encodeSessionResponse,
  encodeTensor,
  encodeTensorMessage,
  type InfoResponse,
  MAX_AWAITED_STEPS,
  MalformedMessageError,
  MessageTooLargeError,
  type SessionRequest,
  type SessionResponse
} from '../../protocol/index.js'
import { protoEnumValues, schema, type WireMessageType } from '../../protocol/schema.js'

const hidden = encodeTensor(
  Float32Array.from({ length: 128 }, (_, i) => i / 7),
  [2, 64],
  'f16'
)

const info: InfoResponse = {
  modelId: 'sha256-abc123',
  version: '1.0.0',
  nLayers: 22,
  dim: 2048,
  start: 4,
  end: 12,
  throughput: 123.5,
  freeCacheTokens: 8192,
  maxSessions: 16,
  activeSessions: 3,
  wireDtypes: ['f32', 'f16', 'q8_0'],
  x25519PublicKey: new Uint8Array(32).fill(7)
}

const requests: SessionRequest[] = [
  {
    requestId: 1,
    type: 'open',
    open: {
      sessionId: 's-1',
      modelId: 'sha256-abc123',
      start: 4,
      end: 12,
      maxLength: 2048,
      wireDtype: 'q8_0',
      nextHops: [{ peerId: '12D3KooWabc', addrs: ['/ip4/127.0.0.1/tcp/4001'], start: 12, end: 20 }]
    }
  },
  { requestId: 2, type: 'step', step: { sessionId: 's-1', stepId: 2 ** 53 - 1, startPosition: 5, hidden, chain: true } },
  {
    requestId: 6,
    type: 'step',
    step: {
      sessionId: 's-1',
      stepId: 3,
      startPosition: 6,
      hidden,
      chain: true,
      hopAuth: [new Uint8Array(32).fill(1)],
      oneWay: true,
      timings: [{ peerId: '12D3KooWabc', computeMs: 0.5 }],
      receipts: [
        {
          peerId: '12D3KooWabc',
          start: 0,
          end: 12,
          inputHash: new Uint8Array(32),
          outputHash: new Uint8Array(32).fill(2),
          signature: new Uint8Array(64).fill(3)
        }
      ]
    }
  },
  { requestId: 3, type: 'rewind', rewind: { sessionId: 's-1', length: 0 } },
  { requestId: 4, type: 'close', close: { sessionId: 's-1' } },
  { requestId: 7, type: 'awaitResults', awaitResults: { sessionId: 's-1', stepIds: [4, 5, 2 ** 53 - 1] } },
  {
    // chained, per-hop ids (issue #39): the id to forward under, the id the upstream's receipts name
    requestId: 8,
    type: 'open',
    open: {
      sessionId: 's-2',
      modelId: 'sha256-abc123',
      start: 4,
      end: 12,
      maxLength: 2048,
      wireDtype: 'f32',
      nextHops: [{ peerId: '12D3KooWabc', addrs: [], start: 12, end: 20, sessionId: 's-3' }],
      upstreamPeerId: '12D3KooWdef',
      upstreamSessionId: 's-1'
    }
  }
]

const responses: SessionResponse[] = [
  { requestId: 1, type: 'opened', opened: { sessionId: 's-1' } },
  { requestId: 8, type: 'opened', opened: { sessionId: 's-2', chainedSessionIds: true } },
  {
    requestId: 2,
    type: 'result',
    result: { sessionId: 's-1', stepId: 9, hidden, timings: [{ peerId: '12D3KooWabc', computeMs: 1.25 }], receipts: [] }
  },
  { requestId: 3, type: 'rewound', rewound: { sessionId: 's-1', length: 7 } },
  { requestId: 4, type: 'closed', closed: { sessionId: 's-1' } },
  {
    requestId: 7,
    type: 'results',
    results: [
      { sessionId: 's-1', stepId: 4, hidden, timings: [], receipts: [] },
      { sessionId: 's-1', stepId: 5, hidden, timings: [], receipts: [] }
    ]
  },
  { requestId: 0, type: 'error', error: { code: 'BUSY', message: 'full', stepId: 0, peerId: '12D3KooWabc' } }
]

/** Encodes a raw wire object, skipping our validation, to play a hostile peer. */
function raw<P>(type: WireMessageType<P, unknown>, wire: object): Uint8Array {
  return type.encode(wire as P).finish()
}

const stepWire = (over: object = {}, tensor: object = {}) => ({
  requestId: 5,
  step: {
    sessionId: 's',
    stepId: 1,
    startPosition: 0,
    hidden: { shape: [1, 4], dtype: 0, data: new Uint8Array(16), ...tensor },
    ...over
  }
})

function stepOf(req: SessionRequest) {
  if (req.type !== 'step') throw new Error('not a step')
  return req.step
}

describe('schema', () => {
  it('keeps the TS enum tables in sync with layerswarm.proto', () => {
    expect(protoEnumValues('ErrorCode')).toEqual(ErrorCode)
    expect(protoEnumValues('DType')).toEqual({ F32: DTYPE_VALUES.f32, F16: DTYPE_VALUES.f16, Q8_0: DTYPE_VALUES.q8_0 })
  })
})

describe('round trips', () => {
  it('info', () => {
    expect(decodeInfoRequest(encodeInfoRequest())).toEqual({})
    expect(encodeInfoRequest().byteLength).toBe(0)
    expect(decodeInfoResponse(encodeInfoResponse(info))).toEqual(info)
  })

  it('info with the KV dtype of the span (absent from older peers; unknown names refused)', () => {
    for (const kvDtype of ['f32', 'f16', 'q8_0'] as const) {
      expect(decodeInfoResponse(encodeInfoResponse({ ...info, kvDtype }))).toEqual({ ...info, kvDtype })
    }
    expect(() => encodeInfoResponse({ ...info, kvDtype: 'q4_0' as 'f16' })).toThrow(MalformedMessageError)
  })

  it('session requests and responses', () => {
    for (const req of requests) expect(decodeSessionRequest(encodeSessionRequest(req))).toEqual(req)
    for (const res of responses) expect(decodeSessionResponse(encodeSessionResponse(res))).toEqual(res)
  })

  it('tensor', () => {
    const t = encodeTensor(Float32Array.of(1, 2, 3), [3], 'f32')
    expect(decodeTensorMessage(encodeTensorMessage(t))).toEqual(t)
    expect(decodeTensorMessage(raw(schema.Tensor, { shape: [3], dtype: 0, data: t.data }))).toEqual(t)
  })
})

describe('validation', () => {
  const decodeReq = (wire: object) => () => decodeSessionRequest(raw(schema.SessionRequest, wire))

  it('refuses audits of no step, of more steps than a hop keeps, or past 2^53', () => {
    const audit = (stepIds: number[]) => decodeReq({ requestId: 8, awaitResults: { sessionId: 's', stepIds } })
    expect(audit([])).toThrow(MalformedMessageError)
    expect(audit(Array.from({ length: MAX_AWAITED_STEPS + 1 }, (_, i) => i + 1))).toThrow(MalformedMessageError)
    expect(audit([2 ** 55])).toThrow(MalformedMessageError)
    expect(audit([1, 2])().type).toBe('awaitResults')
    const results = (n: number) =>
      raw(schema.SessionResponse, {
        requestId: 8,
        results: { results: Array.from({ length: n }, (_, i) => ({ sessionId: 's', stepId: i + 1 })) }
      })
    expect(() => decodeSessionResponse(results(MAX_AWAITED_STEPS + 1))).toThrow(MalformedMessageError)
    expect(decodeSessionResponse(results(2)).type).toBe('results')
  })

  it('rejects malformed bytes', () => {
    expect(() => decodeSessionRequest(Uint8Array.of(0x0a, 0xff, 0xff))).toThrow(MalformedMessageError)
    expect(() => decodeSessionResponse(Uint8Array.of(0xff))).toThrow(MalformedMessageError)
    expect(() => decodeInfoResponse(Uint8Array.of(0x12, 0x05, 0x61))).toThrow(MalformedMessageError)
  })

  it('rejects a missing body and request id 0', () => {
    expect(decodeReq({ requestId: 1 })).toThrow(/missing or unsupported body/)
    // protobuf semantics: when several oneof members are on the wire, the last one wins
    const both = raw(schema.SessionRequest, { requestId: 1, close: { sessionId: 'a' }, rewind: { sessionId: 'a', length: 1 } })
    expect(decodeSessionRequest(both).type).toBe('close')
    expect(decodeReq({ requestId: 0, close: { sessionId: 'a' } })).toThrow(/request_id/)
  })

  it('rejects unknown enum values', () => {
    expect(decodeReq(stepWire({}, { dtype: 7 }))).toThrow(/unknown dtype 7/)
    const open = { sessionId: 's', modelId: 'm', start: 0, end: 1, maxLength: 1, wireDtype: 9 }
    expect(decodeReq({ requestId: 1, open })).toThrow(MalformedMessageError)
    // unknown error codes from newer peers are read as UNKNOWN; unknown capability dtypes are dropped
    const err = raw(schema.SessionResponse, { requestId: 1, error: { code: 99, message: 'new' } })
    expect(decodeSessionResponse(err)).toMatchObject({ error: { code: 'UNKNOWN' } })
    const inf = raw(schema.InfoResponse, { ...info, wireDtypes: [0, 5, 1] })
    expect(decodeInfoResponse(inf).wireDtypes).toEqual(['f32', 'f16'])
  })

  it('rejects wrong tensor data lengths and oversized shapes', () => {
    expect(decodeReq(stepWire({}, { data: new Uint8Array(15) }))).toThrow(/needs 16 bytes/)
    expect(decodeReq(stepWire({}, { shape: [1 << 20, 1 << 20] }))).toThrow(MessageTooLargeError)
    expect(decodeReq(stepWire({}, { shape: [1, 0] }))).toThrow(/positive/)
    expect(decodeReq(stepWire({}, { shape: [1, 1, 1, 1, 4] }))).toThrow(MalformedMessageError)
    expect(decodeReq(stepWire({ hidden: null }))).toThrow(/missing tensor/)
  })

  it('rejects uint64 values above 2^53', () => {
    // uint64 as (low, high) words, the form protobufjs reads and writes: 2^53 + 1
    const big = { low: 1, high: 0x200000, unsigned: true }
    expect(decodeReq(stepWire({ stepId: big }))).toThrow(/2\^53/)
    expect(decodeReq({ ...stepWire(), requestId: big })).toThrow(MalformedMessageError)
    const ok = { low: 0xffffffff, high: 0x1fffff, unsigned: true } // 2^53 - 1
    const decoded = decodeSessionRequest(raw(schema.SessionRequest, stepWire({ stepId: ok })))
    expect(decoded.type === 'step' && decoded.step.stepId).toBe(2 ** 53 - 1)
    expect(() => encodeSessionRequest({ ...requests[3], requestId: 2 ** 53 })).toThrow(MalformedMessageError)
  })

  it('bounds strings and lists', () => {
    expect(decodeReq({ requestId: 1, close: { sessionId: 'x'.repeat(129) } })).toThrow(/longer than 128/)
    expect(decodeReq({ requestId: 1, close: { sessionId: '' } })).toThrow(/empty/)
    expect(decodeReq({ requestId: 1, close: { sessionId: 'a b' } })).toThrow(/printable ASCII/)
    const hops = Array.from({ length: 65 }, () => ({ peerId: 'p', start: 0, end: 1 }))
    const open = { sessionId: 's', modelId: 'm', start: 0, end: 1, maxLength: 1, nextHops: hops }
    expect(decodeReq({ requestId: 1, open })).toThrow(/more than 64/)
    // per-hop ids (issue #39) are session ids: the same bounds
    const one = { peerId: 'p', start: 1, end: 2 }
    const idOf = (nextId: string, upstreamSessionId = 's') =>
      decodeReq({ requestId: 1, open: { ...open, nextHops: [{ ...one, sessionId: nextId }], upstreamSessionId } })
    expect(idOf('x'.repeat(129))).toThrow(/next_hops\[0\].session_id.*longer than 128/)
    expect(idOf('a b')).toThrow(/printable ASCII/)
    expect(idOf('n', 'u\n')).toThrow(/upstream_session_id/)
    expect(idOf('n')().type).toBe('open')
  })

  it('rejects empty or inverted spans with BAD_SPAN', () => {
    const open = { sessionId: 's', modelId: 'm', start: 3, end: 3, maxLength: 1 }
    expect(decodeReq({ requestId: 1, open })).toThrow(BadSpanError)
    expect(() => encodeInfoResponse({ ...info, end: 23 })).toThrow(BadSpanError)
  })

  it('attaches the request id (and step id) to validation errors', () => {
    try {
      decodeSessionRequest(raw(schema.SessionRequest, stepWire({ stepId: 77 }, { dtype: 9 })))
      expect.unreachable()
    } catch (err) {
      expect(err).toBeInstanceOf(MalformedMessageError)
      expect((err as MalformedMessageError).requestId).toBe(5)
      expect((err as MalformedMessageError).stepId).toBe(77)
    }
  })

  it('caps input size before parsing', () => {
    const bytes = encodeSessionRequest(requests[1])
    expect(() => decodeSessionRequest(bytes, { maxMessageBytes: 10 })).toThrow(MessageTooLargeError)
    expect(() => decodeSessionRequest(bytes, { maxTensorElements: 64 })).toThrow(MessageTooLargeError)
  })

  it('chained steps: timings only with one_way, receipts only chained, one_way only chained, receipts checked', () => {
    const receipt = {
      peerId: '12D3KooWabc',
      start: 0,
      end: 4,
      inputHash: new Uint8Array(32),
      outputHash: new Uint8Array(32),
      signature: new Uint8Array(64)
    }
    const decode = (over: object) => decodeSessionRequest(raw(schema.SessionRequest, stepWire(over)))
    expect(stepOf(decode({ chain: true, oneWay: true, receipts: [receipt] }))).toMatchObject({
      oneWay: true,
      receipts: [receipt],
      timings: []
    })
    // a two-way chained step carries the upstream receipts its tag's client input hash is taken from
    expect(stepOf(decode({ chain: true, receipts: [receipt] }))).toMatchObject({ receipts: [receipt] })
    expect(() => decode({ receipts: [receipt] })).toThrow(MalformedMessageError)
    expect(() => decode({ chain: true, timings: [{ peerId: '12D3KooWabc', computeMs: 1 }] })).toThrow(MalformedMessageError)
    expect(() => decode({ oneWay: true })).toThrow(MalformedMessageError)
    expect(() => decode({ chain: true, oneWay: true, receipts: [{ ...receipt, signature: new Uint8Array(10) }] })).toThrow(
      MalformedMessageError
    )
    expect(() => decode({ chain: true, oneWay: true, receipts: new Array(65).fill(receipt) })).toThrow()
  })

  it('validates what we send, too', () => {
    expect(() => encodeSessionRequest({ requestId: 2, type: 'step', step: { ...stepOf(requests[1]), sessionId: '' } })).toThrow()
    const badTensor = { ...hidden, data: hidden.data.subarray(1) }
    expect(() =>
      encodeSessionResponse({
        requestId: 1,
        type: 'result',
        result: { sessionId: 's', stepId: 1, hidden: badTensor, timings: [] }
      })
    ).toThrow(MalformedMessageError)
  })
})
