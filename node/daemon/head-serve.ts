/**
 * The head on this peer (issue #35): when a step asks it (Step.head) and this session runs the
 * model's last block, the node runs the final norm and LM head on its output and answers the
 * top-k of each row sealed under the session's head key (crypto/head-seal.ts), bound to the
 * step id, position and rows. The head's weights are read the first time a step asks.
 *
 * What this peer learns by serving it: the output distribution of every step it answers, hence
 * the generated text (docs/security.md, "The head on a peer"). That is why clients opt in.
 */
import { headReplyKey, sealHeadReply } from '../../crypto/index.js'
import { type HeadRequest, MalformedMessageError } from '../../protocol/index.js'
import {
  createEdge,
  type Edge,
  encodeHeadRows,
  type HeadRow,
  headTopK,
  type Kernels,
  type ModelFile,
  type ShardLike
} from '../../shards/index.js'
import type { NodeSession } from './node-session.js'

/** A developer's adversary (canary/head-tamper.ts): rewrites each row before it is sealed. */
export type HeadRowTransform = (row: HeadRow, logits: Float32Array) => HeadRow

export interface HeadServeInit {
  readonly model: ModelFile
  readonly shard: ShardLike
  readonly peerId: string
  readonly tamper?: HeadRowTransform
}

export class HeadServer {
  private edge?: Edge

  constructor(private readonly init: HeadServeInit) {}

  /** Whether a step of this session may ask the head: its span ends at the model's last block. */
  serves(session: NodeSession): boolean {
    return session.end === this.init.model.config.nLayers
  }

  /** The sealed top-k of a step's output [rows, dim] (its last row, or every row). */
  reply(
    session: NodeSession,
    step: { stepId: number; startPosition: number; head: HeadRequest },
    output: Float32Array
  ): Uint8Array {
    if (!session.keys) throw new MalformedMessageError(`session ${session.id} was opened without keys: no sealed head`)
    const { dim, vocabSize } = this.init.model.config
    const rows = output.length / dim
    const edge = this.loaded()
    const req = step.head
    const asked = req.allRows ? rows : 1
    const logits = req.allRows ? edge.logits(output, rows) : edge.lastLogits(output, rows)
    const out: HeadRow[] = []
    for (let r = 0; r < asked; r++) {
      const row = logits.subarray(r * vocabSize, (r + 1) * vocabSize)
      const top = headTopK(row, req)
      out.push(this.init.tamper ? this.init.tamper(top, row) : top)
    }
    const key = headReplyKey(session.keys)
    try {
      const binding = {
        sessionId: session.id,
        hopPeerId: this.init.peerId,
        stepId: step.stepId,
        position: step.startPosition,
        rows: asked
      }
      return sealHeadReply(key, binding, encodeHeadRows(out, req.valuesF32, req.logSumExp === true))
    } finally {
      key.fill(0)
    }
  }

  private loaded(): Edge {
    const kernels = (this.init.shard as { kernels?: Kernels }).kernels
    this.edge ??= createEdge({ model: this.init.model, ...(kernels ? { kernels } : {}) })
    return this.edge
  }
}
