/**
 * Typed errors of the engine. One class per condition, each with a stable `code`
 * (the wire ErrorCode name when the condition travels, protocol/errors.ts) so callers and the wire protocol can map them without string matching.
 */
export class EngineError extends Error {
  readonly code: string = 'ENGINE'
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.name = new.target.name
  }
}

/** The file ends before a header, a metadata value or a tensor it declares. */
export class TruncatedFileError extends EngineError {
  override readonly code = 'TRUNCATED_FILE'
}

/** The file does not start with the magic number of the format it was opened as. */
export class BadMagicError extends EngineError {
  override readonly code = 'BAD_MAGIC'
}

/** A tensor of a ggml type the engine has no kernel for (IQ*, TQ*, I8…; see shards/quant/ggml-types.ts). */
export class UnsupportedTensorTypeError extends EngineError {
  override readonly code = 'UNSUPPORTED_TENSOR_TYPE'
}

/** A tensor type id that ggml does not define at all (a corrupt or foreign file). */
export class UnknownTensorTypeError extends EngineError {
  override readonly code = 'UNKNOWN_TENSOR_TYPE'
}

/** A tensor whose type × shape does not fit the bytes the file gives it (or a row not whole blocks). */
export class TensorSizeMismatchError extends EngineError {
  override readonly code = 'TENSOR_SIZE_MISMATCH'
}

/** A model architecture, file version or hyper-parameter the engine cannot run. */
export class UnsupportedModelError extends EngineError {
  override readonly code = 'UNSUPPORTED_MODEL'
}

/** The file is well-formed but its contents contradict each other (shapes, missing tensors). */
export class InvalidModelError extends EngineError {
  override readonly code = 'INVALID_MODEL'
}

/** The tokenizer does not belong to the model (vocabulary size, special ids). */
export class TokenizerMismatchError extends EngineError {
  override readonly code = 'TOKENIZER_MISMATCH'
}

/** A session would grow past the KV cache it was given (wire code OUT_OF_CACHE; protocol/errors.ts re-exports this class). */
export class OutOfCacheError extends EngineError {
  override readonly code = 'OUT_OF_CACHE'
}

/** A step whose positions do not continue (or rewind) the session. */
export class PositionError extends EngineError {
  override readonly code = 'BAD_POSITION'
}

/**
 * A session id the shard does not know, or (raised by the node's session manager) no session of
 * that id owned by the caller (wire code UNKNOWN_SESSION; protocol/errors.ts re-exports this class).
 */
export class UnknownSessionError extends EngineError {
  override readonly code = 'UNKNOWN_SESSION'
}

/** An argument outside its documented range or of the wrong shape. */
export class InvalidArgumentError extends EngineError {
  override readonly code = 'INVALID_ARGUMENT'
}

/** An optional npm package a command needs (e.g. a vocabulary package for make-model --vocab) is not installed. */
export class MissingPackageError extends EngineError {
  override readonly code = 'MISSING_PACKAGE'
}

/** The kernel set asked for explicitly cannot run here. */
export class KernelsUnavailableError extends EngineError {
  override readonly code = 'KERNELS_UNAVAILABLE'
}

/** The WebAssembly heap cannot hold an allocation (wasm32 stops at 4 GiB). */
export class KernelMemoryError extends EngineError {
  override readonly code = 'KERNEL_MEMORY'
}

/** A kernel thread failed (trap in WebAssembly or an exception in the native addon). */
export class KernelThreadError extends EngineError {
  override readonly code = 'KERNEL_THREAD'
}

/** A read from a model file after it was closed. */
export class FileClosedError extends EngineError {
  override readonly code = 'FILE_CLOSED'
}

/** The native addon refused to repack a matrix to its rows8 layout (a type or shape it should take). */
export class RepackRefusedError extends EngineError {
  override readonly code = 'REPACK_REFUSED'
}

/**
 * A ggml backend asked for (`--backend ggml-cpu|ggml-cuda|…`) cannot run here: its package is not
 * installed, the span addon is not built, or no device of that kind was found (issue 32). The
 * message names what to install.
 */
export class BackendUnavailableError extends EngineError {
  override readonly code = 'BACKEND_UNAVAILABLE'
}

/** A JSON-schema keyword or shape constrained sampling cannot enforce (shards/constrain; refused, never ignored). */
export class UnsupportedSchemaError extends EngineError {
  override readonly code = 'UNSUPPORTED_SCHEMA'
}

/** Issue 33: bytes or a manifest that do not hash to the content id (lsw1-…) they were asked for. */
export class WeightsIdMismatchError extends EngineError {
  override readonly code = 'WEIGHTS_ID_MISMATCH'
}

/** Issue 33: a tensor of a partly fetched model file (a span, an edge) that this store does not hold. */
export class TensorNotHeldError extends EngineError {
  override readonly code = 'TENSOR_NOT_HELD'
}

/**
 * The `code` of a thrown value, when it has a string one (our typed errors, Node's system errors,
 * libp2p's): one typed reading instead of a cast at every catch (issue 36;
 * test/house/error-code-casts.test.ts keeps the cast from coming back).
 */
export function errorCode(err: unknown): string | undefined {
  if (err == null || typeof err !== 'object') return undefined
  const { code } = err as { code?: unknown }
  return typeof code === 'string' ? code : undefined
}
