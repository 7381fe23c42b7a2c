import { closeSync, fstatSync, openSync, readSync } from 'node:fs'
import { FileClosedError, TruncatedFileError } from '../errors.js'

/**
 * Ranged reads from a file with a byte counter, so a shard can show it read only its span.
 * Every read allocates a fresh ArrayBuffer of its own, so f32 tensors are 4-byte aligned.
 */
export class RangedFile {
  readonly path: string
  readonly sizeBytes: number
  private fd: number | undefined
  private readBytes = 0

  constructor(path: string) {
    this.path = path
    this.fd = openSync(path, 'r')
    this.sizeBytes = fstatSync(this.fd).size
  }

  /**
   * Read exactly `length` bytes at `offset`, or throw TruncatedFileError: into `into` when given
   * (its first `length` bytes; e.g. kernel memory, so no intermediate copy), else a new buffer.
   */
  read(offset: number, length: number, what: string, into?: Uint8Array): Uint8Array {
    if (offset + length > this.sizeBytes) {
      throw new TruncatedFileError(
        `${this.path}: ${what} needs bytes ${offset}..${offset + length} but the file has ${this.sizeBytes}`
      )
    }
    const out = into ? into.subarray(0, length) : new Uint8Array(length)
    if (out.length < length) throw new RangeError(`${what}: destination holds ${out.length} bytes, needs ${length}`)
    let done = 0
    while (done < length) {
      const n = readSync(this.handle(), out, done, length - done, offset + done)
      if (n === 0) throw new TruncatedFileError(`${this.path}: unexpected end of file while reading ${what}`)
      done += n
    }
    this.readBytes += length
    return out
  }

  bytesRead(): number {
    return this.readBytes
  }

  close(): void {
    if (this.fd !== undefined) closeSync(this.fd)
    this.fd = undefined
  }

  private handle(): number {
    if (this.fd === undefined) throw new FileClosedError(`${this.path} is closed`)
    return this.fd
  }
}
