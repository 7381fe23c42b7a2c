import { createShard, type Kernels, type ModelFile, type Shard } from '../../shards/index.js'
import type { HopTarget } from '../session/hop.js'

/*
 * What a hop should answer to the input it was actually fed (issue #39). A relayed decoy spans
 * the route, each hop fed the previous hop's actual output (client/verification/relay-decoy.ts): a colluding
 * pair comparing one hop's output with the next hop's input must find them equal, as for a real
 * session. That input is not the canary's exact hidden state whenever the upstream hop drifts
 * benignly (a q8_0 KV cache drifts ~10x an f16 one), and the drift carries through the next span:
 * scored against the canary's reference, an honest f16-KV hop behind a q8_0-KV hop was convicted
 * (test/e2e/canary-kv-dtype.test.ts, the first attempt's failure). So each hop after the first is
 * scored against the client's own computation of its span on the very rows it was fed, KV and
 * all, with the client's trusted kernels (the ones the canary traces are built with): its drift is
 * its own, in its own benign class (wire, KV dtype), whatever its upstream did. The cost is the
 * client computing those spans for each decoy step (docs/verification.md).
 */

/** One hop of one decoy, replayed: its KV cache holds the rows the hop was fed. */
export interface ReplaySession {
  /** The span's output for `input` at `position` (rows from `position` on are replaced, as a rollback). */
  run(input: Float32Array, position: number): Float32Array
  /** Every row fed so far, positions 0 .. the last step's end (what a third party needs to recompute: evidence). */
  inputs(): Float32Array
  close(): void
}

let replays = 0

/** The client's own shards for replayed spans, one per span, loaded when first needed. */
export class SpanReplay {
  private readonly shards = new Map<string, Shard>()

  constructor(
    private readonly model: ModelFile,
    private readonly kernels?: Kernels
  ) {}

  /** A replay of `target`'s span for one decoy session of `maxLength` positions. */
  open(target: Pick<HopTarget, 'start' | 'end'>, maxLength: number): ReplaySession {
    const key = `${target.start}/${target.end}`
    let shard = this.shards.get(key)
    if (!shard) {
      shard = createShard({ model: this.model, start: target.start, end: target.end, kernels: this.kernels })
      this.shards.set(key, shard)
    }
    const s = shard
    const id = `replay-${++replays}`
    const dim = this.model.config.dim
    s.openSession(id, { maxLength })
    let fed = new Float32Array(0)
    let open = true
    return {
      run(input, position) {
        const out = s.forward(id, input, position)
        const next = new Float32Array(position * dim + input.length)
        next.set(fed.subarray(0, position * dim))
        next.set(input, position * dim)
        fed = next
        return out
      },
      inputs: () => fed,
      close() {
        if (open) s.closeSession(id)
        open = false
      }
    }
  }

  close(): void {
    for (const s of this.shards.values()) s.close()
    this.shards.clear()
  }
}
