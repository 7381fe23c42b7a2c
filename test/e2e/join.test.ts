/**
 * Issue #19, `layerswarm join`: it picks its span from the swarm's announcements (peers the
 * bootstrap peer only heard of count), serves it, and moves when a peer leaves a gap (Petals'
 * rule), keeping its peer id; a client then generates through the rebalanced swarm.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { afterAll, describe, expect, it } from 'vitest'
import { type LocalNode, startLocalNode } from '../../node/cli/local-swarm.js'
import { chooseSpan, type ServedSpan } from '../../node/daemon/placement/span-selection.js'
import { CLI } from '../helpers/cli.js'
import { cliAsync } from '../helpers/cli-async.js'
import { GGUF_PATH, loadReference, ROOT } from '../helpers/reference.js'

const ref = loadReference('stories260K_greedy_once_upon_a_time')
const FAST = ['--kernels', 'reference', '--announce-interval', '300']

describe('layerswarm join', () => {
  const nodes: LocalNode[] = []
  let joiner: ChildProcess | undefined
  afterAll(async () => {
    joiner?.kill('SIGTERM')
    await Promise.all(nodes.map((n) => n.stop()))
  })

  it('picks the span from announcements, serves it, and moves to cover a gap', { timeout: 240_000 }, async () => {
    // A serves [0,3) (three blocks: about a third of a one-block node's tokens/s per block),
    // B [3,4) and C [4,5) joined through A, so only A's announcements tell of them.
    const a = await startLocalNode({ model: GGUF_PATH, layers: '0:3', args: FAST })
    nodes.push(a)
    const b = await startLocalNode({ model: GGUF_PATH, layers: '3:4', bootstrap: [a.addrs[0]], args: FAST })
    const c = await startLocalNode({ model: GGUF_PATH, layers: '4:5', bootstrap: [a.addrs[0]], args: FAST })
    nodes.push(b, c)
    const key = join(mkdtempSync(join(tmpdir(), 'layerswarm-join-')), 'identity.key')
    joiner = spawn(
      process.execPath,
      [
        CLI,
        'join',
        '--model',
        GGUF_PATH,
        '--bootstrap',
        a.addrs[0],
        '--num-blocks',
        '1',
        '--identity',
        key,
        '--verbose',
        '--check-interval',
        '1000',
        '--kv-dtype',
        'f32',
        '--drain',
        '500',
        ...FAST
      ],
      { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] }
    )
    const stderr: string[] = []
    createInterface({ input: joiner.stderr! }).on('line', (l) => stderr.push(l))
    const events: Array<Record<string, unknown>> = []
    const waiters: Array<() => void> = []
    createInterface({ input: joiner.stdout! }).on('line', (l) => {
      events.push(JSON.parse(l))
      for (const w of waiters.splice(0)) w()
    })
    const next = async (event: string, after = 0): Promise<Record<string, unknown>> => {
      const deadline = Date.now() + 120_000
      for (;;) {
        const e = events.slice(after).find((x) => x.event === event)
        if (e) return e
        if (Date.now() > deadline || joiner?.exitCode !== null)
          throw new Error(`no ${event} event; events ${JSON.stringify(events)}\n${stderr.join('\n')}`)
        await new Promise<void>((r) => {
          waiters.push(r)
          setTimeout(r, 1_000)
        })
      }
    }
    const first = await next('serving')
    // it saw B's and C's spans, which only announcements carry (it was given A's address only),
    // and took the block Petals' selection picks from them (the lowest measured throughput)
    const swarm = first.swarm as ServedSpan[]
    expect(swarm.map((s) => [s.start, s.end]).sort()).toEqual([
      [0, 3],
      [3, 4],
      [4, 5]
    ])
    expect(first.layers).toEqual(chooseSpan(5, 1, swarm))

    // a peer leaves a block only it served (B's block 3, or C's block 4 if join took block 3):
    // the bottleneck drops to 0, moving there lifts it, so join moves, keeping its peer id
    const [leaver, gap] = (first.layers as number[])[0] === 3 ? [c, [4, 5]] : [b, [3, 4]]
    await leaver.stop()
    const moving = await next('moving')
    expect(moving.to).toEqual(gap)
    expect(moving.bottleneckNow).toBe(0)
    const again = await next('serving', events.indexOf(moving))
    expect(again.layers).toEqual(gap)
    expect(again.peerId).toBe(first.peerId)

    const r = await cliAsync(
      [
        'generate',
        '--model',
        GGUF_PATH,
        '--bootstrap',
        a.addrs[0],
        '--prompt',
        ref.prompt,
        '--max-tokens',
        '24',
        '--temperature',
        '0',
        '--json'
      ],
      120_000
    )
    expect(r.status, r.stderr).toBe(0)
    const out = JSON.parse(r.stdout) as { tokens: number[]; report: { routes: Array<Array<{ peerId: string }>> } }
    expect(out.tokens).toEqual(ref.generated_tokens.slice(0, 24))
    // block 4 is the client's own edge block: only a move to block 3 puts join's node on the route
    if (gap[0] === 3) expect(out.report.routes.flat().map((h) => h.peerId)).toContain(first.peerId)
  })
})
