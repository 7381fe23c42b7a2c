/**
 * Issue 6 part 4b: with `snapshotEvery`, the client keeps every hop's sealed KV deltas; when the
 * serving peer dies, the replacement imports them and replays only the positions after the last
 * snapshot. The generated tokens must not change.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type LocalNode, startLocalNode } from '../../node/cli/local-swarm.js'
import { createFaultClient, FAULT_NODE_ARGS, generateWithFault, startSpans } from '../helpers/fault.js'
import { GGUF_PATH, loadReference } from '../helpers/reference.js'

const ref = loadReference('stories260K_greedy_once_upon_a_time')
const EVERY = 8

describe('failover from sealed KV snapshots', () => {
  const nodes: LocalNode[] = []

  beforeAll(async () => {
    // Two peers serve the same span [1, 4), nothing else: the test kills the one in use.
    nodes.push(...(await startSpans(['1:4', '1:4'])))
  })

  afterAll(async () => {
    await Promise.all(nodes.map((n) => n.stop()))
  })

  it(`kill the serving peer at token 40 of 64: restored from snapshots every ${EVERY} positions, identical tokens`, async () => {
    const events: Array<Record<string, unknown>> = []
    const client = await createFaultClient(nodes, events, { snapshotEvery: EVERY })
    try {
      await client.view.waitForRoute(1, 4, 20_000)
      const {
        tokens,
        result,
        victim: killed
      } = await generateWithFault(client, events, nodes, { at: 40, fault: (n) => n.kill() })
      expect(tokens).toEqual(ref.generated_tokens)
      const { report } = result
      expect(report.failovers).toBeGreaterThanOrEqual(1)
      expect(report.routes.at(-1)![0].peerId).not.toBe(killed!.peerId)
      const restore = events.find((e) => e.event === 'restore')
      expect(restore, JSON.stringify(events.filter((e) => e.event !== 'step'))).toBeDefined()
      expect(restore!.peerId).toBe(report.routes.at(-1)![0].peerId)
      expect(restore!.fromSnapshot as number).toBeGreaterThanOrEqual(ref.prompt_tokens.length + 40 - EVERY)
      expect(restore!.replayed as number).toBeLessThan(EVERY)
      // no full replay: the new peer's KV came from the snapshots
      expect(events.some((e) => e.event === 'replay')).toBe(false)
    } finally {
      await client.close()
    }
  })

  it('planned leave: SIGTERM the serving peer at token 40; its KV moves sealed, nothing is replayed', async () => {
    const alive = nodes.filter((n) => n.process.exitCode === null && n.process.signalCode === null)
    nodes.push(await startLocalNode({ model: GGUF_PATH, layers: '1:4', bootstrap: [alive[0].addrs[0]], args: FAULT_NODE_ARGS }))
    const events: Array<Record<string, unknown>> = []
    const live = nodes.filter((n) => n.process.exitCode === null && n.process.signalCode === null)
    const client = await createFaultClient(live, events)
    try {
      await client.view.waitForRoute(1, 4, 20_000)
      await new Promise((r) => setTimeout(r, 700)) // both peers announced
      let exited: Promise<unknown> | undefined
      const leave = async (n: LocalNode) => {
        exited = new Promise((resolve) => n.process.once('exit', resolve))
        n.process.kill('SIGTERM')
        await new Promise((r) => setTimeout(r, 100)) // the signal reached it
      }
      const { tokens, result, victim: leaving } = await generateWithFault(client, events, nodes, { at: 40, fault: leave })
      expect(tokens).toEqual(ref.generated_tokens)
      const { report } = result
      expect(report.routes.at(-1)![0].peerId).not.toBe(leaving!.peerId)
      const handoff = events.find((e) => e.event === 'handoff')
      expect(handoff, JSON.stringify(events.filter((e) => e.event !== 'step'))).toBeDefined()
      expect(events.find((e) => e.event === 'failover')).toMatchObject({ peerId: leaving!.peerId, code: 'LEAVING' })
      const restore = events.find((e) => e.event === 'restore')
      expect(restore).toMatchObject({ peerId: report.routes.at(-1)![0].peerId, replayed: 0 })
      expect(events.some((e) => e.event === 'replay')).toBe(false)
      await exited // the leaving peer exits once its session is gone (or the drain ends)
    } finally {
      await client.close()
    }
  })
})
