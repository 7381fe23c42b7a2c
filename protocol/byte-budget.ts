/**
 * A budget of bytes in flight shared by every stream of a node (issue #17): a frame reserves
 * its announced length when its length prefix arrives and frees it when the reader asks for the
 * next frame or the stream ends. A frame that does not fit is refused and its stream reset;
 * frames already admitted go on.
 */
import { BusyError } from './errors.js'

export interface ByteBudget {
  /** Bytes reserved now. */
  readonly inFlight: number
  readonly capacity: number
  /** Reserves n bytes or throws BusyError, leaving the budget as it was. */
  reserve(n: number): void
  release(n: number): void
}

export function createByteBudget(capacityBytes: number): ByteBudget {
  if (!Number.isSafeInteger(capacityBytes) || capacityBytes < 1) throw new RangeError('capacityBytes must be a positive integer')
  let inFlight = 0
  return {
    get inFlight() {
      return inFlight
    },
    capacity: capacityBytes,
    reserve(n) {
      if (inFlight + n > capacityBytes)
        throw new BusyError(
          `a frame of ${n} bytes does not fit the node's budget of bytes in flight (${inFlight} of ${capacityBytes} used)`
        )
      inFlight += n
    },
    release(n) {
      inFlight = Math.max(0, inFlight - n)
    }
  }
}
