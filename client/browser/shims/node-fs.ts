/**
 * node:fs in the browser bundle. Files do not exist there: every call throws NotInBrowserError,
 * except reads of the protocol schema, which the bundler inlines (protocol/schema.ts loads
 * layerswarm.proto at start; scripts/build-browser.mjs defines __LAYERSWARM_PROTO__).
 */
import { NotInBrowserError } from '../errors.js'

declare const __LAYERSWARM_PROTO__: string
const PROTO = 'layerswarm.proto'

const refuse = (what: string) => (): never => {
  throw new NotInBrowserError(`${what} is not available in the browser (no file system)`)
}

export const existsSync = (path: string): boolean => typeof path === 'string' && path.endsWith(PROTO)
export function readFileSync(path: string): string {
  if (typeof path === 'string' && path.endsWith(PROTO)) return __LAYERSWARM_PROTO__
  return refuse(`reading ${path}`)()
}
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
export default { existsSync, readFileSync, openSync, readSync, closeSync, fstatSync, statSync, writeFileSync }
