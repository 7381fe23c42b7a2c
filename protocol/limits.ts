/**
 * Hard limits applied to everything a peer sends (docs/protocol.md "Framing and limits": a hard size cap checked
 * before decoding; docs/security.md: no hostile message may crash a peer). Decoders reject anything
 * outside these bounds with a typed error instead of allocating for it.
 */

/** Largest frame accepted on any stream unless configured otherwise (64 MiB). */
export const DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024

/** Largest number of elements in one tensor (16 Mi: a 64 MiB f32 tensor). */
export const MAX_TENSOR_ELEMENTS = 1 << 24

/** Tensors on the wire are [tokens, dim] activations; 4 dimensions leave room for batches. */
export const MAX_TENSOR_RANK = 4

/** Session ids are client-chosen opaque strings: printable ASCII, no spaces. */
export const MAX_SESSION_ID_LENGTH = 128

/** Model ids are hashes (hex or multibase) of config + weights. */
export const MAX_MODEL_ID_LENGTH = 256

/** A libp2p peer id string (base58btc Ed25519 ids are 52 chars, RSA ones longer). */
export const MAX_PEER_ID_LENGTH = 128

export const MAX_ADDR_LENGTH = 512
export const MAX_ADDRS = 32
export const MAX_VERSION_LENGTH = 64

/** Chained routes longer than this are not useful and only amplify work. */
export const MAX_NEXT_HOPS = 64

/** Upper bound for block indices (spans are [start, end) with end <= this). */
export const MAX_LAYERS = 1 << 16

/** Upper bound for a session's max length and for positions (16 Mi tokens). */
export const MAX_SESSION_LENGTH = 1 << 24

export const MAX_ERROR_MESSAGE_LENGTH = 4096
export const MAX_TIMINGS = 64
export const MAX_WIRE_DTYPES = 16
/**
 * Step ids one AwaitResults may name: a hop keeps its last 8 forwarded outputs per session for
 * audits (node/daemon/chain.ts), so more could not be answered.
 */
export const MAX_AWAITED_STEPS = 8
/** Hop tags a step may carry (one per later hop of a chain). */
export const MAX_HOP_AUTH = MAX_NEXT_HOPS + 16
/** Snapshots one ImportKv may carry (a full one and its deltas). */
export const MAX_IMPORT_SNAPSHOTS = 4096

/** Largest InfoRequest (an empty message) and InfoResponse (ids, numbers, a key and its binding). */
export const MAX_INFO_REQUEST_BYTES = 1024
export const MAX_INFO_RESPONSE_BYTES = 4 * 1024
/**
 * Largest control message: open, rewind, close, await, export and every response but a step
 * result or a snapshot. Also the frame cap for a peer that holds no session on this node.
 */
export const MAX_CONTROL_BYTES = 64 * 1024
/** Bytes a step or step result may carry beside its tensor (hop tags, timings, receipts, ids). */
export const STEP_SLACK_BYTES = 64 * 1024

/**
 * A frame must arrive within FRAME_DEADLINE_MS of its first byte, plus one second per
 * MIN_FRAME_BYTES_PER_SECOND it announces (issue #17: a peer could hold a stream and its buffer
 * forever by sending a frame one byte at a time, yamux keepalives keeping TCP up).
 */
export const FRAME_DEADLINE_MS = 10_000
/**
 * How long a session stream that a node stopped serving (a refused frame) may take to close
 * its writable side before it is reset: a peer that neither reads our ErrorReply nor closes
 * its side would otherwise hold the stream and what it buffered (issue #17, found by the fuzzer).
 */
export const STREAM_CLOSE_TIMEOUT_MS = 10_000
export const MIN_FRAME_BYTES_PER_SECOND = 1024 * 1024

/** Announcements one peer keeps for others to ask for (one per peer id, the newest). */
export const MAX_HELD_ANNOUNCEMENTS = 512

/** Largest queue length a peer may announce (InfoResponse/Announcement.queued_steps); more is MALFORMED. */
export const MAX_QUEUED_STEPS_FIELD = 1 << 20

/** Most leading zero bits a node may ask of an open's proof of work (protocol/open-proof.ts); more is MALFORMED. */
export const MAX_OPEN_PROOF_BITS = 32

/** Issue 33: pieces in one weights manifest (a GGUF header and its tensors; a 405B model has ~1,140). */
export const MAX_WEIGHTS_PIECES = 1 << 16
