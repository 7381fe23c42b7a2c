import type { WasmHeap } from './heap.js'

/**
 * Named scratch regions in the WebAssembly heap (activations in and out of a call). A region
 * only grows, by half again each time, so steady-state calls never allocate.
 */
export interface Scratch {
  get(name: string, bytes: number): number
}

export function createScratch(heap: WasmHeap): Scratch {
  const regions = new Map<string, { offset: number; bytes: number }>()
  return {
    get(name, bytes) {
      const r = regions.get(name)
      if (r && r.bytes >= bytes) return r.offset
      if (r) heap.free(r.offset)
      const size = Math.max(bytes, Math.ceil((r?.bytes ?? 0) * 1.5), 256)
      const offset = heap.alloc(size)
      regions.set(name, { offset, bytes: size })
      return offset
    }
  }
}
