/**
 * `npm run bench -- hop [--model FILE] [--rounds N] [--gap-ms MS] [--thrash-mb N] [--wire f32|f16|q8_0] [--node-kernels KIND]`: the
 * round trip of one activation row through each layer of a swarm hop, measured in one run so
 * the differences are the cost of each layer (medians in ms, JSON):
 *
 *   rawTcp        plain socket echo between two processes (bench/swarm-floor.ts)
 *   libp2pEcho    the same bytes as one frame over libp2p (TCP + Noise + yamux + framing)
 *   sessionEcho   a step/result pair through serveSessionStream / createSessionCaller
 *                 (protobuf session codec, tensor encode/validate) with no node behind it
 *   nodeStep      a real node process (`layerswarm node start`, one block): step tags,
 *                 receipts, session bookkeeping, the block's compute (reported apart)
 *   chain3        a chained step through 3 real node processes (one way: client → 3 hops →
 *                 client), until the client holds the output
 *
 * `--gap-ms` sleeps between round trips, as a client computing its own blocks would.
 * `--thrash-mb N` streams N MB through the caches before each timed round trip, in this process
 * and (after it answers) in the echo peer, as a hop's kernels do between its steps (libp2pEcho
 * and sessionEcho are cold on both ends; nodeStep and chain3 on the client's only; rawTcp never).
 * `--warmup N` (default 2000) round trips of each kind run first, unmeasured: V8 runs the
 * libp2p stack's code interpreted until it has seen it about a thousand times (a cold loopback
 * echo takes ~0.6 ms, a warm one ~0.17 ms), and a node daemon is warm after minutes of serving.
 */
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { fileURLToPath } from 'node:url'
import { multiaddr } from '@multiformats/multiaddr'
import { HopSession, type HopTarget } from '../client/index.js'
import { type LocalNode, startLocalNode } from '../node/cli/local-swarm.js'
import {
  createHost,
  createMessageChannel,
  createSessionCaller,
  type DType,
  encodeTensor,
  SESSION_STREAM_LIMITS
} from '../protocol/index.js'
import { openModelFile } from '../shards/index.js'
import { ECHO_PROTOCOL, SESSION_ECHO_PROTOCOL } from './hop-protocols.js'
import { benchArgs, KERNEL_KINDS, TENSOR_DTYPES } from './options.js'
import { rawTcpRoundTrip } from './swarm-floor.js'
import { median, round } from './swarm-stats.js'

const PEER = fileURLToPath(new URL('./hop-echo-peer.js', import.meta.url))
const DEFAULT_MODEL = fileURLToPath(new URL('../../models/stories260K.gguf', import.meta.url))

/** `warmup` unmeasured calls (JIT, first-use allocations), then `rounds` timed ones; `i` counts on across both. */
/** `--thrash-mb`: a buffer streamed through the caches before each timed call (see main). */
let thrashBuffer: Buffer | undefined

/** `warmup` unmeasured calls (JIT, first-use allocations), then `rounds` timed ones; `i` counts on across both. */
async function timed(rounds: number, gapMs: number, once: (i: number) => Promise<unknown>, warmup = 5): Promise<number[]> {
  for (let i = 0; i < warmup; i++) await once(i)
  const ms: number[] = []
  for (let i = warmup; i < rounds + warmup; i++) {
    if (gapMs > 0) await new Promise((r) => setTimeout(r, gapMs))
    thrashBuffer?.indexOf(255)
    const t0 = performance.now()
    await once(i)
    ms.push(performance.now() - t0)
  }
  return ms
}

export async function main(argv: string[]): Promise<void> {
  const opts = benchArgs(argv, {
    model: DEFAULT_MODEL,
    rounds: '200',
    warmup: '2000',
    'gap-ms': '0',
    'thrash-mb': '0',
    wire: 'f32',
    'node-kernels': 'reference'
  })
  const rounds = opts.int('rounds', 1)
  const warmup = opts.int('warmup', 0)
  const gapMs = opts.number('gap-ms', 0, false)
  // Stream this many MB through the caches before each timed round trip, here and (after each
  // answer) in the echo peer: a hop's kernels stream its weights between two of its steps, so in
  // a swarm every message meets caches the kernels have just emptied.
  const thrashMb = opts.number('thrash-mb', 0, false)
  if (thrashMb > 0) {
    thrashBuffer = Buffer.alloc(Math.round(thrashMb * 2 ** 20))
    process.env.LAYERSWARM_HOP_THRASH_MB = String(thrashMb)
  }
  const wire: DType = opts.oneOf('wire', TENSOR_DTYPES)
  const modelPath = opts.required('model', 'FILE')
  const model = openModelFile(modelPath)
  const { dim, seqLen } = model.config
  if (rounds + 10 > seqLen) throw new Error(`--rounds must be below ${seqLen - 10} (the model's context)`)
  const row = new Float32Array(dim).map((_, i) => Math.sin(i) * 0.1)
  const tensor = encodeTensor(row, [1, dim], wire)
  const bytes = tensor.data.byteLength

  const raw = await rawTcpRoundTrip(bytes, rounds, Math.max(gapMs, 1))
  const child = spawn(process.execPath, [PEER], { stdio: ['ignore', 'pipe', 'inherit'] })
  const nodes: LocalNode[] = []
  const host = await createHost({ listen: [], pubsub: false })
  try {
    const [line] = (await once(child.stdout!, 'data')) as [Buffer]
    const peerAddr = multiaddr(String(line).trim())

    const echo = createMessageChannel(await host.dialProtocol(peerAddr, ECHO_PROTOCOL, SESSION_STREAM_LIMITS))
    const frame = new Uint8Array(bytes + 16) // about a step message's size
    const libp2pEcho = await timed(
      rounds,
      gapMs,
      async () => {
        await echo.write(frame)
        await echo.read()
      },
      warmup
    )

    const caller = createSessionCaller(await host.dialProtocol(peerAddr, SESSION_ECHO_PROTOCOL, SESSION_STREAM_LIMITS))
    const sessionEcho = await timed(
      rounds,
      gapMs,
      (i) =>
        caller.call({
          type: 'step',
          step: { sessionId: 'bench', stepId: i + 1, startPosition: 0, hidden: encodeTensor(row, [1, dim], wire), chain: false }
        }),
      warmup
    )

    const args = [
      '--kernels',
      opts.oneOf('node-kernels', KERNEL_KINDS),
      '--threads',
      '1',
      '--announce-interval',
      '60000',
      '--max-sessions',
      '4'
    ]
    for (let i = 0; i < 3; i++) nodes.push(await startLocalNode({ model: modelPath, layers: `${i}:${i + 1}`, args }))
    const targets: HopTarget[] = nodes.map((n) => ({
      peerId: n.peerId,
      addrs: n.addrs,
      start: n.layers[0],
      end: n.layers[1],
      wireDtype: wire
    }))
    const open = { modelId: nodes[0].modelId, maxLength: seqLen, wireDtype: wire }

    // warm-up sessions of up to seqLen - 10 steps each (a session cannot outgrow the context)
    const warmSessions = async (run: (id: string, steps: number) => Promise<void>): Promise<void> => {
      for (let k = 0, done = 0; done < warmup; k++) {
        const steps = Math.min(seqLen - 10, warmup - done)
        await run(`bench-warm-${k}`, steps)
        done += steps
      }
    }
    await warmSessions(async (id, steps) => {
      const s = await HopSession.open(host, targets[0], dim, { ...open, sessionId: id })
      for (let i = 0; i < steps; i++) await s.sendStep(i + 1, i, row)
      await s.close()
    })
    const single = await HopSession.open(host, targets[0], dim, { ...open, sessionId: 'bench-single' })
    const computeMs: number[] = []
    const nodeStep = await timed(rounds, gapMs, async (i) => {
      const out = await single.sendStep(i + 1, i, row)
      computeMs.push(out.timings[0]?.computeMs ?? 0)
    })
    await single.close()

    const openChain = async (id: string): Promise<HopSession[]> => {
      const hops: HopSession[] = []
      for (let i = 2; i >= 0; i--) {
        hops.unshift(
          await HopSession.open(host, targets[i], dim, {
            ...open,
            sessionId: id,
            next: targets[i + 1],
            upstream: targets[i - 1]?.peerId
          })
        )
      }
      return hops
    }
    const chainStep = async (hops: HopSession[], i: number) => {
      const result = hops[2].awaitResult(i + 1, 1)
      const ack = await hops[0].stepChained(i + 1, i, row, hops.slice(1))
      const got = await Promise.race([result, ack.failed])
      hops[0].settle(ack.requestId)
      return got
    }
    await warmSessions(async (id, steps) => {
      const warm = await openChain(id)
      for (let i = 0; i < steps; i++) await chainStep(warm, i)
      await Promise.all(warm.map((h) => h.close()))
    })
    const hops = await openChain('bench-chain')
    const toResult: number[] = []
    const chainCompute: number[] = []
    await timed(rounds, gapMs, async (i) => {
      const t0 = performance.now()
      const got = await chainStep(hops, i)
      toResult.push(performance.now() - t0)
      chainCompute.push(got.timings.reduce((s, t) => s + t.computeMs, 0))
    })
    await Promise.all(hops.map((h) => h.close()))

    const m = (xs: number[]) => round(median(xs))
    const compute = m(computeMs)
    const result = {
      bench: 'hop',
      model: modelPath,
      dim,
      wire,
      bytes,
      rounds,
      warmup,
      gapMs,
      roundTripMs: {
        rawTcp: raw.hotMs,
        libp2pEcho: m(libp2pEcho),
        sessionEcho: m(sessionEcho),
        nodeStep: m(nodeStep),
        nodeStepCompute: compute,
        chain3: m(toResult.slice(5)),
        chain3Compute: m(chainCompute.slice(5))
      },
      // what each layer adds to one round trip (ms)
      addedMs: {
        libp2p: round(median(libp2pEcho) - raw.hotMs),
        sessionCodec: round(median(sessionEcho) - median(libp2pEcho)),
        nodeStepPath: round(median(nodeStep) - compute - median(sessionEcho)),
        // a chained step makes 4 traversals (client → 3 hops → client); per traversal beyond compute
        chain3PerTraversal: round((median(toResult.slice(5)) - median(chainCompute.slice(5))) / 4)
      }
    }
    console.log(JSON.stringify(result, null, 2))
  } finally {
    await Promise.all(nodes.map((n) => n.stop()))
    await host.stop()
    child.kill()
  }
}
