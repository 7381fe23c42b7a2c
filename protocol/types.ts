/**
 * TypeScript views of the messages in layerswarm.proto: camelCase fields, uint64 as
 * number (decoders reject values above Number.MAX_SAFE_INTEGER), enums as string names.
 */

import type { KvDType } from '../shards/kv-cache.js'
import type { ErrorCodeName } from './errors.js'

/** `enum DType`: f32, f16, or GGUF-style Q8_0 blocks (see layerswarm.proto). */
export type DType = 'f32' | 'f16' | 'q8_0'

/** What the client asks of the head (docs/protocol.md, HeadRequest). */
export interface HeadRequest {
  /** At least this many of the likeliest tokens per row. */
  minK: number
  /** At most this many (the vocabulary size: the full row). */
  maxK: number
  /** The smallest k whose softmax mass at `temperature` reaches this (0: exactly minK). */
  mass: number
  temperature: number
  /** Every row of the step (speculation), else the last only. */
  allRows: boolean
  /** Values as f32, else the top value f32 and f16 gaps below it. */
  valuesF32: boolean
  /** Each row also carries the log-sum-exp of the whole row at temperature 1 (logprobs; session 4). */
  logSumExp?: boolean
  /** The dtype the hop's hidden output travels in (the client checks the head with it); absent: the session's. */
  checkDtype?: DType
}

export interface Tensor {
  /** Row-major dimensions, each >= 1; activations are [tokens, dim]. */
  shape: number[]
  dtype: DType
  /** Exactly tensorByteLength(shape, dtype) bytes. Decoded tensors view the received frame. */
  data: Uint8Array
}

export type InfoRequest = Record<string, never>

export interface InfoResponse {
  modelId: string
  version: string
  nLayers: number
  dim: number
  /** Served span [start, end). */
  start: number
  end: number
  /** Tokens per second for the whole span. */
  throughput: number
  freeCacheTokens: number
  maxSessions: number
  activeSessions: number
  wireDtypes: DType[]
  /** 32 bytes, or empty when the peer offers no key agreement. */
  x25519PublicKey: Uint8Array
  /** The peer identity's signature over x25519PublicKey (crypto bindX25519Key); empty without a key. */
  x25519Binding?: Uint8Array
  /** KV cache storage of the peer's sessions (absent from peers that predate the field). */
  kvDtype?: KvWireDType
  /** What runs the span (issue 32): native, wasm, reference, ggml-cpu, ggml-cuda, …; the ggml device and its memory. */
  backend?: string
  device?: string
  deviceMemoryBytes?: number
  /** As Announcement.modelName (issue 33 item 5). */
  modelName?: string
  /** Steps waiting for the span now (node batching, issue #18); absent from older peers: 0. */
  queuedSteps?: number
  /** Leading zero bits an open's proof of work needs now (protocol/open-proof.ts); absent: 0. */
  openProofBits?: number
}

/** KV cache storage types a peer announces: the engine's own names (a type-only import of shards/kv-cache.ts). */
export type KvWireDType = KvDType

export interface NextHop {
  peerId: string
  addrs: string[]
  start: number
  end: number
  /** Chained mode, issue #39: the id the forwarder writes into the steps it sends this hop (absent: its own). */
  sessionId?: string
}

export interface OpenSession {
  sessionId: string
  modelId: string
  start: number
  end: number
  maxLength: number
  wireDtype: DType
  /** Chained mode: forward output to nextHops[0], which gets nextHops.slice(1). */
  nextHops: NextHop[]
  /** Chained mode: the previous hop, which may send this session's steps. */
  upstreamPeerId?: string
  /** Chained mode, issue #39: the upstream hop's session id, which its receipts are signed for (absent: this session's). */
  upstreamSessionId?: string
  /** The client's X25519 public key (32 bytes) for the session's hop keys. */
  clientX25519PublicKey?: Uint8Array
  /** The session's snapshot key wrapped under the hop keys' snapshotKeyWrapKey. */
  wrappedSnapshotKey?: Uint8Array
  /** Proof of work on open (protocol/open-proof.ts, issue #39): its epoch and nonce. */
  proofEpoch?: number
  proofNonce?: number
}

/** Chained mode: ask the last hop for step `stepId`'s output. */
export interface AwaitResult {
  sessionId: string
  stepId: number
}

/** Chained mode, audits: ask a middle hop for the outputs it forwarded for several steps. */
export interface AwaitResults {
  sessionId: string
  stepIds: number[]
}

export interface Step {
  sessionId: string
  stepId: number
  startPosition: number
  hidden: Tensor
  chain: boolean
  /** Chained mode: the client's step tags for the hops after the receiver, in route order. */
  hopAuth?: Uint8Array[]
  /** Chained one-way mode: no answer unless the step fails; receipts and timings travel with the step. */
  oneWay?: boolean
  /** Chained one-way mode: the compute times of the hops before the receiver, in route order. */
  timings?: HopTiming[]
  /**
   * Chained mode (one-way or not): the signed receipts of the hops before the receiver, in route
   * order. The first one's input hash is the client's input, which the receiver's step tag binds.
   */
  receipts?: Receipt[]
  /** Issue #35: the last block's hop also runs the head and answers its sealed top-k. */
  head?: HeadRequest
}

/** Seal the session's KV for positions [from, to) (full when from = 0 and !delta). */
export interface ExportKv {
  sessionId: string
  from: number
  to: number
  sequence: number
  prefixHash: Uint8Array
  delta: boolean
}

/** Restore a freshly opened session from a full snapshot and deltas, in order. */
export interface ImportKv {
  sessionId: string
  /** The snapshot key wrapped to this peer's X25519 key (crypto wrapKey). */
  wrappedKey: Uint8Array
  snapshots: Uint8Array[]
  /** The session id the snapshots were sealed for (the client's earlier session). */
  snapshotSessionId: string
  /** 32 bytes: the last snapshot must be bound to this prefix. */
  prefixHash: Uint8Array
  /**
   * Append deltas to the KV earlier imports of this session built (a standby fed every N
   * tokens, or one snapshot streamed in several frames); false: the session must be fresh.
   */
  append?: boolean
}

export interface Rewind {
  sessionId: string
  length: number
}

export interface CloseSession {
  sessionId: string
}

export type SessionRequestBody =
  | { type: 'open'; open: OpenSession }
  | { type: 'step'; step: Step }
  | { type: 'rewind'; rewind: Rewind }
  | { type: 'close'; close: CloseSession }
  | { type: 'await'; await: AwaitResult }
  | { type: 'awaitResults'; awaitResults: AwaitResults }
  | { type: 'exportKv'; exportKv: ExportKv }
  | { type: 'importKv'; importKv: ImportKv }

/** request_id is chosen by the opener of the stream, starts at 1 and is echoed in the response. */
export type SessionRequest = { requestId: number } & SessionRequestBody

export interface Opened {
  sessionId: string
  /** The hop honours NextHop.sessionId and upstreamSessionId (issue #39: per-hop ids on a chain). */
  chainedSessionIds?: boolean
}

export interface HopTiming {
  peerId: string
  computeMs: number
}

/** A hop's signed statement of its step (see protocol/receipt.ts). */
export interface Receipt {
  peerId: string
  start: number
  end: number
  inputHash: Uint8Array
  outputHash: Uint8Array
  signature: Uint8Array
}

export interface StepResult {
  sessionId: string
  stepId: number
  /** Absent in chained-mode acknowledgements. */
  hidden?: Tensor
  timings: HopTiming[]
  /** One per hop that ran the step (chained mode: this hop and those after it). */
  receipts?: Receipt[]
  /** Issue #35: the head's sealed top-k (crypto sealHeadReply), when the step asked it. */
  sealedHead?: Uint8Array
}

export interface Rewound {
  sessionId: string
  length: number
}

export interface Closed {
  sessionId: string
}

export interface ErrorReply {
  code: ErrorCodeName
  message: string
  /** The failing step, 0 when the request was not a step. */
  stepId: number
  /** The hop that failed; empty when unknown. */
  peerId: string
}

export type SessionResponseBody =
  | { type: 'opened'; opened: Opened }
  | { type: 'result'; result: StepResult }
  | { type: 'results'; results: StepResult[] }
  | { type: 'rewound'; rewound: Rewound }
  | { type: 'closed'; closed: Closed }
  | { type: 'error'; error: ErrorReply }
  | { type: 'snapshot'; snapshot: { sessionId: string; snapshot: Uint8Array } }
  | { type: 'imported'; imported: { sessionId: string; length: number } }

/** requestId 0 means "not tied to a request" (e.g. an unparseable frame): fatal for the stream. */
export type SessionResponse = { requestId: number } & SessionResponseBody

export interface Announcement {
  peerId: string
  modelId: string
  start: number
  end: number
  throughput: number
  freeCacheTokens: number
  wireDtypes: DType[]
  version: string
  addrs: string[]
  issuedAtMs: number
  expiresAtMs: number
  /** The peer's X25519 key and its identity's signature over it (see InfoResponse). */
  x25519PublicKey?: Uint8Array
  x25519Binding?: Uint8Array
  /** As InfoResponse.kvDtype. */
  kvDtype?: KvWireDType
  /** As InfoResponse.queuedSteps. */
  queuedSteps?: number
  /** What runs the span (issue 32): native, wasm, reference, ggml-cpu, ggml-cuda, … */
  backend?: string
  /** Its ggml device and that device's memory, when a ggml backend runs it. */
  device?: string
  deviceMemoryBytes?: number
  /** A readable name from the GGUF metadata (issue 33 item 5); routing keys on modelId. */
  modelName?: string
  /** Issue 33: the content id (lsw1-…) the peer seeds its weights under. */
  contentId?: string
  /** Issue 33: tokens of client steps asked of the peer's span in the last minute (join's demand signal). */
  demandTokensPerMinute?: number
}

export interface SignedAnnouncement {
  /** The encoded Announcement exactly as signed. */
  announcement: Uint8Array
  /** libp2p protobuf-encoded public key. */
  publicKey: Uint8Array
  signature: Uint8Array
}
