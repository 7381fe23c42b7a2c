import { describe, expect, it } from 'vitest'
import { AuditBatcher, BadReceiptError, type HopSession } from '../../client/index.js'
import { MAX_AUDIT_EVERY } from '../../client/verification/audit-batch.js'
import { type Receipt, sha256 } from '../../protocol/index.js'
import { InvalidArgumentError } from '../../shards/index.js'

/**
 * A middle hop of session `sessionId` that answers audits from its forwarded outputs and logs
 * each request's step ids (one request per hop session and round: awaitResults).
 */
function middleHop(log: string[], outputs: Map<string, Uint8Array>, sessionId: string, maxLength = 64): HopSession {
  return {
    target: { peerId: 'mid', start: 1, end: 2 },
    sessionId,
    maxLength,
    async awaitResults(steps: { stepId: number; rows: number }[]) {
      log.push(`${sessionId}/${steps.map((s) => s.stepId).join(',')}`)
      return steps.map(({ stepId }) => {
        const received = outputs.get(`${sessionId}/${stepId}`)!
        return { hidden: new Float32Array(received.buffer.slice(0)), received }
      })
    }
  } as unknown as HopSession
}
const last = { target: { peerId: 'last', start: 2, end: 3 } } as unknown as HopSession

describe('audit rounds (chained steps audited together)', () => {
  const outputs = new Map<string, Uint8Array>()
  const receiptFor = (key: string, bytes: Uint8Array): Receipt[] => {
    outputs.set(key, bytes)
    return [{ outputHash: sha256(bytes) } as Receipt]
  }

  it('holds audits until `every` real steps, then sends every pending one (decoys too) in one round', async () => {
    const log: string[] = []
    const sessions = new Map(['r', 'd'].map((id) => [id, [middleHop(log, outputs, id), last]]))
    const hops = (sessionId: string) => sessions.get(sessionId)!
    const a = new AuditBatcher(3)
    const got: Array<Promise<Float32Array[]>> = []
    got.push(a.audit('real', hops('r'), 1, 1, receiptFor('r/1', new Uint8Array(new Float32Array([1]).buffer))))
    got.push(a.audit('decoy', hops('d'), 1, 1, receiptFor('d/1', new Uint8Array(new Float32Array([7]).buffer))))
    got.push(a.audit('real', hops('r'), 2, 1, receiptFor('r/2', new Uint8Array(new Float32Array([2]).buffer))))
    await new Promise((r) => setTimeout(r, 10))
    expect(log).toEqual([]) // two real steps: no round yet, the decoy waits with them
    got.push(a.audit('real', hops('r'), 3, 1, receiptFor('r/3', new Uint8Array(new Float32Array([3]).buffer))))
    const outs = await Promise.all(got)
    expect(log).toEqual(['r/1,2,3', 'd/1']) // one request per session
    expect(outs.map((o) => o[0][0])).toEqual([1, 7, 2, 3])
    // a new round starts counting again
    const next = a.audit('real', hops('r'), 4, 1, receiptFor('r/4', new Uint8Array(new Float32Array([4]).buffer)))
    await new Promise((r) => setTimeout(r, 10))
    expect(log).toHaveLength(2)
    // drain: pending audits go now, and so does any audit asked for while it runs
    const drained = await a.drain(async () => {
      const d = a.audit('decoy', hops('d'), 2, 1, receiptFor('d/2', new Uint8Array(new Float32Array([8]).buffer)))
      return [await next, await d]
    })
    expect(drained.map((o) => o[0][0])).toEqual([4, 8])
    expect(log.slice(2)).toEqual(['r/4', 'd/2'])
  })

  it("cuts a hop's round into requests of at most MAX_AWAITED_STEPS steps and max length rows", async () => {
    const log: string[] = []
    const hops = [middleHop(log, outputs, 's', 10), last]
    const a = new AuditBatcher(MAX_AUDIT_EVERY)
    const got: Array<Promise<Float32Array[]>> = []
    // a decoy's 8-row prefill, then 1-row steps: 8 + 1 + 1 rows fit 10, the next one does not
    const rows = [8, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]
    rows.forEach((n, i) => {
      const bytes = new Uint8Array(new Float32Array(n).fill(i + 1).buffer)
      got.push(a.audit('decoy', hops, i + 1, n, receiptFor(`s/${i + 1}`, bytes)))
    })
    for (let k = 0; k < MAX_AUDIT_EVERY; k++) a.audit('real', [last], 100 + k, 1, [])
    const outs = await Promise.all(got)
    expect(log).toEqual(['s/1,2,3', 's/4,5,6,7,8,9,10,11'])
    expect(outs.map((o) => o[0][0])).toEqual(rows.map((_, i) => i + 1))
  })

  it('rejects an audit whose answer is not the output the hop signed', async () => {
    const log: string[] = []
    const a = new AuditBatcher(1)
    outputs.set('x/1', new Uint8Array([1, 2, 3, 4]))
    const signed = [{ outputHash: sha256(new Uint8Array([9, 9, 9, 9])) } as Receipt]
    await expect(a.audit('real', [middleHop(log, outputs, 'x'), last], 1, 1, signed)).rejects.toBeInstanceOf(BadReceiptError)
  })

  it('takes 1 to 6 real steps per round (a middle hop keeps its last 8 outputs)', () => {
    for (const bad of [0, 7, 1.5, Number.NaN]) expect(() => new AuditBatcher(bad)).toThrow(InvalidArgumentError)
    expect(new AuditBatcher().every).toBe(4)
  })
})
