// Keys, key derivation, AEAD, sealed KV snapshots, key wrapping and step authorization
// (docs/design.md §6, issue 6). Imports nothing of ours; never logs or writes anything.

export {
  AES_KEY_BYTES,
  counterNonce,
  GCM_NONCE_BYTES,
  GCM_TAG_BYTES,
  open,
  type PlaintextParts,
  plaintextLength,
  randomNonce,
  seal
} from './aead.js'
export { type AsyncPrimitives, nodePrimitives, webCryptoPrimitives } from './async-primitives.js'
export * from './errors.js'
export { HEAD_REPLY_LABEL, type HeadReplyBinding, headReplyKey, openHeadReply, sealHeadReply } from './head-seal.js'
export {
  deriveHopKeys,
  HOP_KEY_LABEL,
  HOP_KEY_PURPOSES,
  type HopKeyContext,
  type HopKeys,
  hkdfSha256,
  hopKeyInfo
} from './hkdf.js'
export {
  bindX25519Key,
  generateX25519KeyPair,
  type SignFn,
  type VerifyFn,
  verifyX25519Binding,
  X25519_BINDING_DOMAIN,
  X25519_KEY_BYTES,
  type X25519KeyPair,
  x25519,
  x25519BindingMessage,
  x25519KeyPairFromSecret,
  x25519SharedSecret
} from './keys.js'
export { checkKnownAnswers, type KnownAnswerVectors } from './known-answers.js'
export {
  assertStepAuthorized,
  type ControlFields,
  type ControlOp,
  chainedStepBinding,
  controlTag,
  hmacSha256,
  STEP_TAG_BYTES,
  type StepFields,
  sha256,
  stepTag,
  verifyControlTag,
  verifyStepTag
} from './mac.js'
/** A fresh random 32-byte key (snapshot keys: one per session and span, chosen by the client). */
export { randomKey } from './random.js'
export {
  encodeSnapshotHeader,
  type OpenedSnapshot,
  openSnapshot,
  peekSnapshotHeader,
  type SealSnapshotInit,
  SNAPSHOT_MAGIC,
  SNAPSHOT_VERSION,
  type SnapshotDType,
  type SnapshotExpectation,
  type SnapshotHeader,
  type SnapshotKind,
  sealedSnapshotSize,
  sealSnapshot,
  sha256Prefixes,
  tokenPrefixHash
} from './snapshot.js'
export {
  unwrapKey,
  unwrapKeyUnder,
  WRAPPED_KEY_BYTES,
  WRAPPED_KEY_UNDER_BYTES,
  type WrapContext,
  wrapKey,
  wrapKeyUnder,
  x25519KeyId
} from './wrap.js'
