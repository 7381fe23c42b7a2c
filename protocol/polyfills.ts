// libp2p 3 uses Promise.withResolvers (Node 22+); Node 20 needs it defined before libp2p loads.
// Import this module first in every entry point.
const P = Promise as unknown as { withResolvers?: unknown }
if (typeof P.withResolvers !== 'function') {
  P.withResolvers = function withResolvers<T>() {
    let resolve!: (v: T | PromiseLike<T>) => void
    let reject!: (e?: unknown) => void
    const promise = new Promise<T>((res, rej) => {
      resolve = res
      reject = rej
    })
    return { promise, resolve, reject }
  }
}

export {}
