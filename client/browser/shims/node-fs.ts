/**
 * node:fs in the browser bundle. Files do not exist there: every call throws NotInBrowserError,
 * except reads of in-memory files the browser client registered (a canary bank it fetched), so Node's own
 * loaders (canary/canary-bank.ts) read them unchanged.
 */
import { NotInBrowserError } from '../errors.js'

const refuse = (what: string) => (): never => {
  throw new NotInBrowserError(`${what} is not available in the browser (no file system)`)
}

const memoryFiles = new Map<string, Uint8Array>()

/** Make `bytes` readable at `path` (readFileSync) for the rest of this worker's life. */
export function registerBrowserFile(path: string, bytes: Uint8Array): void {
  memoryFiles.set(path, bytes)
}

export const existsSync = (path: string): boolean => typeof path === 'string' && memoryFiles.has(path)
export function readFileSync(path: string, encoding?: string): string | Uint8Array {
  const bytes = memoryFiles.get(path)
  if (bytes === undefined) return refuse(`reading ${path}`)()
  // a Buffer as Node returns (the bundle's Buffer: shims/globals.ts), over a copy
  return encoding ? new TextDecoder().decode(bytes) : Buffer.from(bytes)
}
/** Flags only (client/verification/trust-file.ts opens with O_NOFOLLOW); openSync refuses anyway. */
export const constants = { O_RDONLY: 0, O_NOFOLLOW: 0 }
export const openSync = refuse('opening a file')
export const readSync = refuse('reading a file')
export const closeSync = refuse('closing a file')
export const fstatSync = refuse('fstat')
export const statSync = refuse('stat')
export const writeFileSync = refuse('writing a file')
export const writeSync = refuse('writing a file')
export const mkdirSync = refuse('creating a directory')
export const renameSync = refuse('renaming a file')
export const rmSync = refuse('removing a file')
export const chmodSync = refuse('chmod')
export const mkdtempSync = refuse('creating a directory')
/** shards/formats/weights-store.ts (issue 33): a browser tab keeps no fetched model files. */
export const ftruncateSync = refuse('truncating a file')
export default { existsSync, readFileSync, openSync, readSync, closeSync, fstatSync, statSync, writeFileSync }
