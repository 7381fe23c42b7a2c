import { randomBytes } from 'node:crypto'

/** 32 bytes from the OS CSPRNG (node:crypto.randomBytes): a fresh AES-256 / HMAC key. */
export function randomKey(): Uint8Array {
  return new Uint8Array(randomBytes(32))
}
