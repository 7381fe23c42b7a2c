/**
 * `npm run fuzz -- [--frames N] [--seed S] [--target node|client|both] [--attackers K] [--checkpoints C]`: the seeded
 * protocol fuzzer of issue #17. N frames of each message type go to a real node process and N
 * hostile replies to a real client; prints one JSON summary
 * with C node memory checkpoints (live heap after a full GC, RSS, external) and a verdict. Exit code 1 if the node died, an
 * honest step differed, an INTERNAL error or an untyped/unhandled rejection was seen.
 */
import { parseArgs } from 'node:util'
import { fuzzClient } from './client-target.js'
import { fuzzNode } from './node-target.js'

const { values } = parseArgs({
  args: process.argv.slice(2),
  options: {
    frames: { type: 'string', default: '1000' },
    seed: { type: 'string', default: '1' },
    target: { type: 'string', default: 'both' },
    attackers: { type: 'string', default: '4' },
    model: { type: 'string' },
    checkpoints: { type: 'string', default: '10' }
  }
})
const frames = Number(values.frames)
const seed = Number(values.seed)
if (!Number.isSafeInteger(frames) || frames < 1) throw new Error('--frames: a positive integer')
const checkpoints = Number(values.checkpoints)
if (!Number.isSafeInteger(checkpoints) || checkpoints < 2) throw new Error('--checkpoints: an integer >= 2')
const log = (line: string): void => {
  process.stderr.write(`${line}\n`)
}
// SIGINT/SIGTERM end the run early: the summary says what was sent and projects the whole run
const stop = new AbortController()
for (const sig of ['SIGINT', 'SIGTERM'] as const) process.once(sig, () => stop.abort())
const command = `npm run fuzz -- --frames ${frames} --seed ${seed} --target ${values.target} --attackers ${values.attackers}`
const out: Record<string, unknown> = { command }
let ok = true
if (values.target === 'node' || values.target === 'both') {
  const node = await fuzzNode({
    frames,
    seed,
    attackers: Number(values.attackers),
    model: values.model,
    memoryCheckpoints: checkpoints,
    log,
    signal: stop.signal
  })
  out.node = node
  ok &&= node.nodeAlive && node.honestBitIdentical && node.internalErrors === 0
}
if (values.target === 'client' || values.target === 'both') {
  const client = await fuzzClient({ replies: frames, seed, log, signal: stop.signal })
  out.client = client
  ok &&= client.untypedErrors === 0 && client.unhandledRejections === 0
}
out.ok = ok
console.log(JSON.stringify(out, null, 2))
if (!ok) process.exitCode = 1
