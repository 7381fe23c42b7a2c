import { KernelMemoryError } from '../../errors.js'
import { HEAP_BASE, MAX_PAGES, PAGE } from './layout.js'
import { type WasmMemory, wasmApi } from './wasm-module.js'

/**
 * Allocator over the shared WebAssembly memory that the kernel threads all see. First fit with
 * coalescing: allocations are few and large (weight matrices, KV layers, scratch), so a sorted
 * free list is enough. Views are refreshed after the memory grows (growing a shared memory
 * never detaches old views; they just stop short of the new end).
 */
export interface WasmHeap {
  readonly memory: WasmMemory
  alloc(bytes: number): number
  free(offset: number): void
  u8(): Uint8Array
  f32(): Float32Array
  i32(): Int32Array
  u16(): Uint16Array
  /** Bytes currently allocated. */
  used(): number
}

const ALIGN = 64

/**
 * `onGrow(buffer)` runs once with the new memory and again after each growth, before any byte of
 * the added pages is written (the kernels advise huge pages there).
 */
export function createWasmHeap(initialPages = 32, onGrow?: (buffer: SharedArrayBuffer) => void): WasmHeap {
  if (!wasmApi) throw new KernelMemoryError('WebAssembly is not available')
  const memory = new wasmApi.Memory({ initial: initialPages, maximum: MAX_PAGES, shared: true })
  onGrow?.(memory.buffer)
  const sizes = new Map<number, number>()
  /** Free ranges [start, end), sorted by start. */
  const freeList: Array<[number, number]> = [[HEAP_BASE, initialPages * PAGE]]
  let used = 0
  let views = makeViews(memory.buffer)

  function makeViews(buffer: ArrayBufferLike) {
    return {
      u8: new Uint8Array(buffer),
      f32: new Float32Array(buffer),
      i32: new Int32Array(buffer),
      u16: new Uint16Array(buffer)
    }
  }
  function current() {
    if (views.u8.byteLength !== memory.buffer.byteLength) views = makeViews(memory.buffer)
    return views
  }
  function grow(bytes: number): void {
    const end = memory.buffer.byteLength
    const last = freeList[freeList.length - 1]
    const tailFree = last && last[1] === end ? last[1] - last[0] : 0
    const need = Math.ceil((bytes - tailFree) / PAGE)
    const pages = Math.min(MAX_PAGES - end / PAGE, Math.max(need, Math.ceil(end / PAGE / 4)))
    if (pages < need) throw new KernelMemoryError(`WebAssembly heap full: cannot add ${bytes} bytes to ${end}`)
    memory.grow(pages)
    onGrow?.(memory.buffer)
    const newEnd = end + pages * PAGE
    if (last && last[1] === end) last[1] = newEnd
    else freeList.push([end, newEnd])
  }

  return {
    memory,
    alloc(bytes) {
      const size = Math.max(ALIGN, Math.ceil(bytes / ALIGN) * ALIGN)
      for (let attempt = 0; attempt < 2; attempt++) {
        for (let i = 0; i < freeList.length; i++) {
          const range = freeList[i]
          if (range[1] - range[0] < size) continue
          const offset = range[0]
          range[0] += size
          if (range[0] === range[1]) freeList.splice(i, 1)
          sizes.set(offset, size)
          used += size
          return offset
        }
        grow(size)
      }
      throw new KernelMemoryError(`WebAssembly heap cannot allocate ${bytes} bytes`)
    },
    free(offset) {
      const size = sizes.get(offset)
      if (size === undefined) return
      sizes.delete(offset)
      used -= size
      let i = 0
      while (i < freeList.length && freeList[i][0] < offset) i++
      freeList.splice(i, 0, [offset, offset + size])
      // Coalesce with the neighbours.
      if (i + 1 < freeList.length && freeList[i][1] === freeList[i + 1][0]) {
        freeList[i][1] = freeList[i + 1][1]
        freeList.splice(i + 1, 1)
      }
      if (i > 0 && freeList[i - 1][1] === freeList[i][0]) {
        freeList[i - 1][1] = freeList[i][1]
        freeList.splice(i, 1)
      }
    },
    u8: () => current().u8,
    f32: () => current().f32,
    i32: () => current().i32,
    u16: () => current().u16,
    used: () => used
  }
}
