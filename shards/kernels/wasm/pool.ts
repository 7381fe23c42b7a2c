import { Worker } from 'node:worker_threads'
import { KernelThreadError } from '../../errors.js'
import { CTRL_ENGINE, CTRL_ERROR, CTRL_GENERATION, CTRL_NEXT, CTRL_PENDING, CTRL_REST, CTRL_SLOTS, CTRL_STOP } from './layout.js'
import type { WasmMemory, WasmModule } from './wasm-module.js'

/** Which engine runs the op the host wrote into the argument block. */
export type TaskEngine = 'wasm' | 'native'

/**
 * Persistent worker threads that run one parallel kernel call at a time. Workers start once;
 * each call bumps a generation counter in a control block and wakes them (spin briefly, then
 * Atomics.wait). The calling thread does share 0, then claims any share no worker has claimed
 * yet (a shared counter hands out shares 1..n-1), and waits on a pending counter only for
 * shares a worker is running. A worker that sleeps (an idle node between steps) or is
 * descheduled (more threads than cores) therefore never stalls a call: it runs at one thread's
 * speed until the workers are awake. Shares are fixed row ranges, so which thread runs one
 * changes no bit of the result. No thread start-up or message passing on the hot path.
 */
export interface ThreadPool {
  readonly threads: number
  run(engine: TaskEngine): void
  /**
   * Idle workers sleep now instead of spinning until the next call. For a caller about to wait
   * on something slow (the network): spinning workers hold cores that other processes on the
   * host, such as the next peer of a local swarm, need. The next run() wakes them again.
   */
  rest(): void
  /** Resolves once every worker has started and instantiated its kernels (calls work before). */
  ready(): Promise<void>
  close(): void
}

export interface ThreadPoolOptions {
  readonly module: WasmModule
  readonly memory: WasmMemory
  readonly threads: number
  /** Runs share `tid` of `n` of the current op on the calling thread. */
  readonly mainTask: (engine: TaskEngine, tid: number, n: number) => void
  /** Absolute path of the native addon, loaded in every worker too (null: WebAssembly only). */
  readonly nativePath: string | null
  /** Busy-wait iterations before sleeping (keeps per-call wake-up in the microseconds). */
  readonly spin?: number
}

// CommonJS source evaluated in each worker (eval: true), so it needs no file next to the
// compiled module and works the same from TypeScript sources and from dist/.
const WORKER_SOURCE = `
const { workerData, parentPort } = require('node:worker_threads')
const { module, memory, control, n, spin, nativePath } = workerData
const ctrl = new Int32Array(control)
const wasmTask = new WebAssembly.Instance(module, { env: { memory } }).exports.task
const base = new Uint8Array(memory.buffer, 0, 1)
let nativeTask = null
if (nativePath) {
  try { nativeTask = require(nativePath).task } catch {}
}
parentPort.postMessage('ready')
let gen = 0
for (;;) {
  let g = Atomics.load(ctrl, ${CTRL_GENERATION})
  let spins = 0
  while (g === gen) {
    if (++spins > spin || Atomics.load(ctrl, ${CTRL_REST}) !== 0) { Atomics.wait(ctrl, ${CTRL_GENERATION}, gen); spins = 0 }
    g = Atomics.load(ctrl, ${CTRL_GENERATION})
  }
  gen = g
  if (Atomics.load(ctrl, ${CTRL_STOP}) !== 0) break
  // claim shares of the current op until none is left (the caller may have taken them all)
  for (;;) {
    const share = Atomics.add(ctrl, ${CTRL_NEXT}, 1)
    if (share >= n) break
    try {
      if (Atomics.load(ctrl, ${CTRL_ENGINE}) === 1) nativeTask(base, share, n)
      else wasmTask(share, n)
    } catch (e) {
      Atomics.store(ctrl, ${CTRL_ERROR}, 1)
    }
    if (Atomics.sub(ctrl, ${CTRL_PENDING}, 1) === 1) Atomics.notify(ctrl, ${CTRL_PENDING})
  }
}
`

const CALL_TIMEOUT_MS = 120_000

export function createThreadPool(options: ThreadPoolOptions): ThreadPool {
  const { threads, mainTask } = options
  const spin = options.spin ?? 20_000
  const control = new SharedArrayBuffer(CTRL_SLOTS * 4)
  const ctrl = new Int32Array(control)
  Atomics.store(ctrl, CTRL_NEXT, threads) // no shares to claim before the first call
  const workers: Worker[] = []
  const started: Promise<void>[] = []
  for (let tid = 1; tid < threads; tid++) {
    const worker = new Worker(WORKER_SOURCE, {
      eval: true,
      workerData: {
        module: options.module,
        memory: options.memory,
        control,
        n: threads,
        spin,
        nativePath: options.nativePath
      }
    })
    // Errors surface through the control block; an idle pool must not keep the process alive.
    worker.on('error', () => Atomics.store(ctrl, CTRL_ERROR, 1))
    worker.unref()
    workers.push(worker)
    started.push(
      new Promise<void>((resolve) => {
        worker.once('message', () => resolve())
        worker.once('exit', () => resolve())
      })
    )
  }
  let closed = false

  return {
    threads,
    run(engine) {
      if (closed) throw new KernelThreadError('kernel thread pool is closed')
      if (threads === 1) {
        mainTask(engine, 0, 1)
        return
      }
      // ENGINE and PENDING before NEXT: a worker still claiming from the previous call may take
      // a share of this one as soon as NEXT is reset (the argument block is already written).
      Atomics.store(ctrl, CTRL_REST, 0)
      Atomics.store(ctrl, CTRL_ENGINE, engine === 'native' ? 1 : 0)
      Atomics.store(ctrl, CTRL_PENDING, threads - 1)
      Atomics.store(ctrl, CTRL_NEXT, 1)
      Atomics.add(ctrl, CTRL_GENERATION, 1)
      Atomics.notify(ctrl, CTRL_GENERATION)
      let failure: unknown = null
      try {
        mainTask(engine, 0, threads)
      } catch (e) {
        failure = e
      }
      // shares no worker has claimed yet: a sleeping or descheduled worker would only delay them
      for (;;) {
        const share = Atomics.add(ctrl, CTRL_NEXT, 1)
        if (share >= threads) break
        try {
          mainTask(engine, share, threads)
        } catch (e) {
          failure ??= e
        }
        Atomics.sub(ctrl, CTRL_PENDING, 1)
      }
      // A worker that died (its 'error' event cannot run while this thread blocks) would leave
      // the call pending forever: give up after a deadline far beyond any single kernel call.
      let spins = 0
      let deadline = 0
      for (;;) {
        const pending = Atomics.load(ctrl, CTRL_PENDING)
        if (pending === 0) break
        if (++spins <= spin) continue
        if (deadline === 0) deadline = Date.now() + CALL_TIMEOUT_MS
        else if (Date.now() > deadline) {
          closed = true
          throw new KernelThreadError(`kernel threads did not finish within ${CALL_TIMEOUT_MS} ms`)
        }
        Atomics.wait(ctrl, CTRL_PENDING, pending, 50)
      }
      if (failure !== null) throw new KernelThreadError('kernel call failed on the main thread', { cause: failure })
      if (Atomics.exchange(ctrl, CTRL_ERROR, 0) !== 0) throw new KernelThreadError('kernel call failed on a worker thread')
    },
    rest() {
      Atomics.store(ctrl, CTRL_REST, 1)
    },
    ready: () => Promise.all(started).then(() => undefined),
    close() {
      if (closed) return
      closed = true
      Atomics.store(ctrl, CTRL_STOP, 1)
      Atomics.add(ctrl, CTRL_GENERATION, 1)
      Atomics.notify(ctrl, CTRL_GENERATION)
      for (const w of workers) void w.terminate()
    }
  }
}
