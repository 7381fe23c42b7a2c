/**
 * A peer's long-lived identity: its libp2p Ed25519 key in a file readable by the owner only, so
 * the peer id (and with it bootstrap addresses `/p2p/<id>`, a client's bans and canary records,
 * receipts' signatures) stays the same across restarts (issue #19). The file holds the key in
 * libp2p's protobuf encoding (`privateKeyToProtobuf`, what js-libp2p and kubo keystores hold).
 */
import { randomBytes } from 'node:crypto'
import {
  closeSync,
  constants,
  fstatSync,
  linkSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync
} from 'node:fs'
import { homedir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { generateKeyPair, privateKeyFromProtobuf, privateKeyToProtobuf } from '@libp2p/crypto/keys'
import type { AbortOptions, PrivateKey } from '@libp2p/interface'
import { peerIdFromPrivateKey } from '@libp2p/peer-id'
import { errorCode } from '../shards/index.js'
import { IdentityExistsError, IdentityFileExposedError, IdentityNotFoundError, InvalidIdentityFileError } from './errors.js'
import { CLIENT_IDENTITY_FILE_NAME, DEFAULT_HOME_DIR_NAME, HOME_ENV, IDENTITY_FILE_NAME, TRUST_FILE_NAME } from './options.js'

/** Larger than any libp2p key's protobuf (Ed25519: 68 bytes; RSA-4096: about 2.4 KiB). */
const MAX_IDENTITY_FILE_BYTES = 16 * 1024

export interface Identity {
  readonly privateKey: PrivateKey
  /** The peer id, as libp2p prints it. */
  readonly peerId: string
  readonly path: string
  /** True when this call made the key (first start). */
  readonly created: boolean
}

/** `$LAYERSWARM_HOME`, else `~/.layerswarm` (tests point the variable at a scratch folder). */
export function layerswarmHome(env: NodeJS.ProcessEnv = process.env): string {
  const fromEnv = env[HOME_ENV]
  return resolve(fromEnv !== undefined && fromEnv !== '' ? fromEnv : join(homedir(), DEFAULT_HOME_DIR_NAME))
}

/** Where a node keeps its key by default; `role: 'client'` for a client's. */
export function defaultIdentityPath(role: 'node' | 'client' = 'node', env: NodeJS.ProcessEnv = process.env): string {
  return join(layerswarmHome(env), role === 'node' ? IDENTITY_FILE_NAME : CLIENT_IDENTITY_FILE_NAME)
}

/** A client's trust file beside its key file (its canary secret sits beside the trust file). */
export function clientTrustFile(identityPath: string): string {
  return join(dirname(resolve(identityPath)), TRUST_FILE_NAME)
}

/**
 * Read the key at `path`. Throws IdentityNotFoundError when there is no file,
 * IdentityFileExposedError when group or others may read or write it (POSIX), and
 * InvalidIdentityFileError when it holds no key. A symlink is not followed (O_NOFOLLOW): a key
 * is read from the file named, never from wherever a link planted there points.
 */
export function readIdentity(path: string): Identity {
  if (typeof path !== 'string' || path === '') throw new InvalidIdentityFileError('an identity path is a non-empty string')
  let fd: number
  try {
    fd = openSync(path, constants.O_RDONLY | (constants.O_NOFOLLOW ?? 0))
  } catch (e) {
    const code = errorCode(e)
    if (code === 'ENOENT') throw new IdentityNotFoundError(`no identity at ${path} (layerswarm identity new makes one)`)
    if (code === 'ELOOP') throw new InvalidIdentityFileError(`identity ${path} is a symbolic link; name the key file itself`)
    throw new InvalidIdentityFileError(`cannot read identity ${path}: ${(e as Error).message}`)
  }
  try {
    const st = fstatSync(fd)
    if (!st.isFile()) throw new InvalidIdentityFileError(`identity ${path} is not a regular file`)
    if (process.platform !== 'win32' && (st.mode & 0o077) !== 0)
      throw new IdentityFileExposedError(
        `identity ${path} has mode ${(st.mode & 0o777).toString(8)}; others may read it (chmod 600 ${path}, or make a new one: the old key may have leaked)`
      )
    if (st.size === 0 || st.size > MAX_IDENTITY_FILE_BYTES)
      throw new InvalidIdentityFileError(`identity ${path} has ${st.size} bytes; not a libp2p private key`)
    const bytes = readFileSync(fd)
    let privateKey: PrivateKey
    try {
      privateKey = privateKeyFromProtobuf(new Uint8Array(bytes))
    } catch (e) {
      throw new InvalidIdentityFileError(`identity ${path} is not a libp2p private key: ${(e as Error).message}`)
    }
    return { privateKey, peerId: peerIdFromPrivateKey(privateKey).toString(), path, created: false }
  } finally {
    closeSync(fd)
  }
}

/** Write `key` to a fresh owner-only temporary file beside `path` and return its name. */
function writeTemp(path: string, key: PrivateKey): string {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 })
  // An unpredictable name created exclusively: a file or symlink planted there makes the write fail.
  const tmp = `${path}.${randomBytes(12).toString('hex')}.tmp`
  writeFileSync(tmp, privateKeyToProtobuf(key), { mode: 0o600, flag: 'wx' })
  return tmp
}

/**
 * Make a new Ed25519 identity at `path`. Without `overwrite` an existing file is kept and
 * IdentityExistsError thrown (a new key is a new peer id: every bootstrap address and trust
 * record naming the old one goes stale). The file appears whole or not at all (a temporary file
 * linked or renamed into place).
 */
export async function createIdentity(
  path: string,
  { overwrite = false, signal }: { overwrite?: boolean } & AbortOptions = {}
): Promise<Identity> {
  if (typeof path !== 'string' || path === '') throw new InvalidIdentityFileError('an identity path is a non-empty string')
  const privateKey = await generateKeyPair('Ed25519')
  signal?.throwIfAborted()
  const tmp = writeTemp(path, privateKey)
  try {
    if (overwrite) renameSync(tmp, path)
    else linkSync(tmp, path) // fails with EEXIST instead of replacing: two first starts keep one key
  } catch (e) {
    if (errorCode(e) === 'EEXIST')
      throw new IdentityExistsError(`${path} already holds an identity (--force replaces it, and changes the peer id)`)
    throw new InvalidIdentityFileError(`cannot write identity ${path}: ${(e as Error).message}`)
  } finally {
    rmSync(tmp, { force: true })
  }
  return { privateKey, peerId: peerIdFromPrivateKey(privateKey).toString(), path, created: true }
}

/** The key at `path`, made (0600, in a 0700 folder) on first use. */
export async function loadOrCreateIdentity(path: string, options: AbortOptions = {}): Promise<Identity> {
  try {
    return readIdentity(path)
  } catch (e) {
    if (!(e instanceof IdentityNotFoundError)) throw e
  }
  try {
    return await createIdentity(path, { signal: options.signal })
  } catch (e) {
    // another process made it between our read and our link: use theirs
    if (e instanceof IdentityExistsError) return readIdentity(path)
    throw e
  }
}
