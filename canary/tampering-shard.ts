import type { BatchStep, ShardLike } from '../shards/index.js'
import type { Tamper } from './tamper.js'

/**
 * A span that lies: `shard`'s outputs passed through `tamper` (canary/tamper.ts), for measuring
 * the canary detector against real node processes (`layerswarm node start --tamper*`, a
 * developer option). The node is given this Shard in place of the honest one, so the tampering
 * wraps the daemon from outside and its step path carries no test hook (issue 36). A tampering
 * peer still signs what it sends: its receipts become the evidence.
 *
 * A step is named by the span session it runs in and its first position, so a retried step is
 * tampered the same way. The KV cache stays honest; only the returned hidden states change.
 */
export function tamperingShard<S extends ShardLike>(shard: S, tamper: Tamper): S {
  const dim = shard.config.dim
  const apply = (id: string, input: Float32Array, startPos: number, output: Float32Array): Float32Array =>
    tamper.apply({ sessionId: id, stepId: startPos, input, output, startPosition: startPos, rows: output.length / dim })
  const forward: ShardLike['forward'] = (id, hidden, startPos, onBlock) =>
    apply(id, hidden, startPos, shard.forward(id, hidden, startPos, onBlock))
  const forwardBatch: ShardLike['forwardBatch'] = (steps: readonly BatchStep[]) =>
    shard.forwardBatch(steps).map((out, i) => apply(steps[i].id, steps[i].hidden, steps[i].startPos, out))
  return new Proxy(shard, {
    get(target, prop) {
      if (prop === 'forward') return forward
      if (prop === 'forwardBatch') return forwardBatch
      // everything else is the honest shard's own, called on it (not on the proxy)
      const value = Reflect.get(target, prop, target)
      return typeof value === 'function' ? value.bind(target) : value
    }
  })
}
