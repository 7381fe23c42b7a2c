/**
 * The Node globals the SDK's modules touch, for the browser bundle: `setImmediate`, `process` (env lookups at
 * load time, e.g. protocol/step-trace.ts) and a small `Buffer` (Uint8Array with the static and
 * encoding helpers the SDK calls: from, concat, alloc, toString hex/utf8/base64). Imported first
 * by worker-entry.ts.
 */
const g = globalThis as unknown as { process?: unknown; __layerswarmBuffer?: unknown; setImmediate?: unknown }

type Enc = 'hex' | 'utf8' | 'utf-8' | 'base64' | 'latin1' | undefined

class BrowserBuffer extends Uint8Array {
  override toString(enc?: Enc, start = 0, end = this.length): string {
    const b = this.subarray(start, end)
    if (enc === 'hex') return Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('')
    if (enc === 'base64') return btoa(String.fromCharCode(...b))
    if (enc === 'latin1') return String.fromCharCode(...b)
    return new TextDecoder().decode(b)
  }
  readUIntBE(offset: number, byteLength: number): number {
    let v = 0
    for (let i = 0; i < byteLength; i++) v = v * 256 + this[offset + i]
    return v
  }
  readUInt32LE(offset = 0): number {
    return new DataView(this.buffer, this.byteOffset, this.byteLength).getUint32(offset, true)
  }
}

const bufferOf = (bytes: ArrayLike<number>): BrowserBuffer => {
  const out = new BrowserBuffer(bytes.length)
  out.set(bytes)
  return out
}

// Node's statics, on the class (Uint8Array's own `from` is shadowed, as in Node).
Object.assign(BrowserBuffer, {
  from(value: string | ArrayLike<number> | ArrayBuffer, encOrOffset?: Enc | number, length?: number): BrowserBuffer {
    if (typeof value === 'string') {
      const enc = encOrOffset as Enc
      if (enc === 'hex') return bufferOf((value.match(/../g) ?? []).map((h) => Number.parseInt(h, 16)))
      if (enc === 'base64') return bufferOf(Array.from(atob(value), (c) => c.charCodeAt(0)))
      return bufferOf(new TextEncoder().encode(value))
    }
    if (value instanceof ArrayBuffer || (typeof SharedArrayBuffer === 'function' && value instanceof SharedArrayBuffer)) {
      return new BrowserBuffer(value as ArrayBuffer, (encOrOffset as number | undefined) ?? 0, length)
    }
    return bufferOf(value as ArrayLike<number>)
  },
  concat(list: readonly Uint8Array[]): BrowserBuffer {
    const out = new BrowserBuffer(list.reduce((n, b) => n + b.length, 0))
    let o = 0
    for (const b of list) {
      out.set(b, o)
      o += b.length
    }
    return out
  },
  alloc: (n: number, fill = 0): BrowserBuffer => new BrowserBuffer(n).fill(fill),
  isBuffer: (v: unknown): boolean => v instanceof BrowserBuffer,
  byteLength: (s: string): number => new TextEncoder().encode(s).length
})

// setImmediate (client/session/step-transport.ts): a macrotask, through a MessageChannel (setTimeout(0)
// is clamped to 4 ms once nested, on every step)
if (g.setImmediate === undefined) {
  const channel = new MessageChannel()
  const queue: Array<() => void> = []
  ;(channel.port1 as unknown as { onmessage: () => void }).onmessage = () => queue.shift()?.()
  g.setImmediate = (fn: (...a: unknown[]) => void, ...args: unknown[]) => {
    queue.push(() => fn(...args))
    channel.port2.postMessage(0)
  }
}
if (g.process === undefined) g.process = { env: {}, pid: 0, platform: 'browser', on: () => {}, versions: {} }
// Not globalThis.Buffer: libraries that see one take Node paths (protons-runtime's writer). The
// bundler renames our modules' free `Buffer` to this (scripts/build-browser.mjs `define`).
g.__layerswarmBuffer = BrowserBuffer

export {}
