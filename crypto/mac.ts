/**
 * Step authorization for chained forwarding (issue 6 §2): a step reaches a hop from the
 * previous hop, not from the client, so it carries a tag the client made with the hop's
 * stepMacKey (deriveHopKeys): HMAC-SHA256 (RFC 2104) over a domain tag and the length-prefixed
 * step fields. The hop recomputes it and compares in constant time; a missing or wrong tag is
 * an unauthorized step. stepId and startPosition in the tag let the hop refuse a replayed tag
 * for another position; inputHash (SHA-256 of the input tensor bytes) binds the data itself.
 */
import { createHash, createHmac, timingSafeEqual } from 'node:crypto'
import { assertBytes, assertString, assertUint, FieldWriter } from './encoding.js'
import { InvalidCryptoArgumentError, UnauthorizedStepError } from './errors.js'

export const STEP_TAG_BYTES = 32
const STEP_DOMAIN = 'layerswarm/step-auth/v1'
const CONTROL_DOMAIN = 'layerswarm/control-auth/v1'

export interface StepFields {
  readonly sessionId: string
  readonly stepId: number
  readonly startPosition: number
  /** SHA-256 of the step's input bytes as they travel (sha256()), 32 bytes. */
  readonly inputHash: Uint8Array
}

export function sha256(data: Uint8Array): Uint8Array {
  assertBytes('data', data)
  return new Uint8Array(createHash('sha256').update(data).digest())
}

/** HMAC-SHA256 (RFC 2104, RFC 4231 vectors) of `data` under `key`. */
export function hmacSha256(key: Uint8Array, data: Uint8Array): Uint8Array {
  assertBytes('key', key)
  assertBytes('data', data)
  return new Uint8Array(createHmac('sha256', key).update(data).digest())
}

function stepMessage(f: StepFields): Uint8Array {
  if (f === null || typeof f !== 'object') throw new InvalidCryptoArgumentError('step fields must be an object')
  assertString('sessionId', f.sessionId, 256)
  assertUint('stepId', f.stepId)
  assertUint('startPosition', f.startPosition, 0xffffffff)
  assertBytes('inputHash', f.inputHash, 32)
  return new FieldWriter().string(STEP_DOMAIN).string(f.sessionId).u64(f.stepId).u32(f.startPosition).bytes(f.inputHash).finish()
}

/** The client's authorization of one step for one hop. */
export function stepTag(stepMacKey: Uint8Array, fields: StepFields): Uint8Array {
  assertBytes('stepMacKey', stepMacKey, 32)
  return hmacSha256(stepMacKey, stepMessage(fields))
}

function equalTag(expected: Uint8Array, tag: unknown): boolean {
  return tag instanceof Uint8Array && tag.length === expected.length && timingSafeEqual(expected, tag)
}

/** Constant-time check of a step tag; false for a missing, short or wrong tag. */
export function verifyStepTag(stepMacKey: Uint8Array, fields: StepFields, tag: Uint8Array | undefined): boolean {
  return equalTag(stepTag(stepMacKey, fields), tag)
}

/** verifyStepTag that throws UnauthorizedStepError (for handlers that map errors to replies). */
export function assertStepAuthorized(stepMacKey: Uint8Array, fields: StepFields, tag: Uint8Array | undefined): void {
  if (!verifyStepTag(stepMacKey, fields, tag)) {
    throw new UnauthorizedStepError(`step ${fields.stepId} of the session carries no valid client authorization`)
  }
}

export type ControlOp = 'rewind' | 'export' | 'import' | 'close' | 'handoff'

export interface ControlFields {
  readonly sessionId: string
  readonly op: ControlOp
  /** Strictly increasing per session (the hop refuses a counter it has seen: replay). */
  readonly counter: number
  /** Operation arguments, canonically encoded by the caller (e.g. the rewind length as u32). */
  readonly args?: Uint8Array
}

/** Authorization of a control request (controlMacKey), for requests that do not come straight from the client. */
export function controlTag(controlMacKey: Uint8Array, f: ControlFields): Uint8Array {
  assertBytes('controlMacKey', controlMacKey, 32)
  assertString('sessionId', f.sessionId, 256)
  assertString('op', f.op, 32)
  assertUint('counter', f.counter)
  const args = f.args ?? new Uint8Array(0)
  assertBytes('args', args)
  return hmacSha256(
    controlMacKey,
    new FieldWriter().string(CONTROL_DOMAIN).string(f.sessionId).string(f.op).u64(f.counter).bytes(args).finish()
  )
}

export function verifyControlTag(controlMacKey: Uint8Array, f: ControlFields, tag: Uint8Array | undefined): boolean {
  return equalTag(controlTag(controlMacKey, f), tag)
}

/**
 * The input hash a chained hop's step tag binds (issue #17). The client cannot know a later hop's
 * input (it is the previous hop's output), so the tag binds what it does know: the step's row
 * count and the SHA-256 of its own input bytes to the first hop. The receiving hop takes that
 * hash from the first hop's signed receipt, which travels with the step, and checks that the
 * receipts chain from it to the bytes it got. With the session, the step id (which a hop
 * requires to go up) and the position, a tag authorizes one step on one input, once.
 */
export function chainedStepBinding(rows: number, clientInputHash: Uint8Array): Uint8Array {
  assertUint('rows', rows)
  assertBytes('clientInputHash', clientInputHash, 32)
  return sha256(new FieldWriter().string(CHAINED_STEP_DOMAIN).u64(rows).bytes(clientInputHash).finish())
}

const CHAINED_STEP_DOMAIN = 'layerswarm chained step rows+input v2'
