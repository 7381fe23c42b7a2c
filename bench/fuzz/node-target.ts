/**
 * Fuzzing a real node process (issue #17): fuzz frames of every request body and InfoRequests go
 * to a `layerswarm node start` child from several libp2p hosts, while an honest session opened
 * first keeps stepping and must give the bit-identical output of an in-process Shard. Every frame
 * must be answered (or its stream ended) with a typed error, never INTERNAL; the node must live.
 */
import { multiaddr } from '@multiformats/multiaddr'
import type { LocalNode } from '../../node/cli/local-swarm.js'
import { DEFAULT_BYTES_IN_FLIGHT, DEFAULT_MAX_SESSIONS } from '../../node/options.js'
import { defaultModelPath } from '../../node/paths.js'
import {
  createHost,
  createSessionCaller,
  decodeTensor,
  encodeTensor,
  fetchInfo,
  type Host,
  SESSION_PROTOCOL,
  SESSION_STREAM_LIMITS,
  type SessionCaller
} from '../../protocol/index.js'
import { createEdge, createShard, errorCode, openModelFile, selectKernels } from '../../shards/index.js'
import { createRng, type FrameContext } from './frames.js'
import { createTally, infoLanes, sessionLane } from './node-lanes.js'
import {
  cpuSeconds,
  createMemoryCheckpoints,
  FUZZ_NODE_HEAP_MIB,
  FUZZ_NODE_SEMI_SPACE_MIB,
  type MemoryCheckpoint,
  type MemoryVerdict,
  memoryVerdict,
  peakRssMiB,
  settledRecords,
  startMeasuredNode
} from './node-memory.js'

/** The bodies of a SessionRequest (protobufjs names) and the info request: the message types fuzzed. */
export const NODE_MESSAGE_TYPES = [
  'open',
  'step',
  'rewind',
  'close',
  'awaitResult',
  'awaitResults',
  'exportKv',
  'importKv',
  'info'
] as const

export interface NodeFuzzOptions {
  /** Frames per message type. */
  readonly frames: number
  readonly seed: number
  readonly model?: string
  /** Attacking hosts (each has its own per-peer limits on the node). */
  readonly attackers?: number
  /** Frames between two steps of the honest session. */
  readonly honestEvery?: number
  /** The node's --max-old-space-size (default FUZZ_NODE_HEAP_MIB). */
  readonly heapMiB?: number
  /** Memory checkpoints over the run (default 10: one every 10% of the frames, plus the start). */
  readonly memoryCheckpoints?: number
  /** Stops the run early (SIGINT/SIGTERM): the summary counts what was sent and projects the rest. */
  readonly signal?: AbortSignal
  readonly log?: (line: string) => void
}

export interface NodeFuzzSummary {
  readonly target: 'node'
  readonly seed: number
  readonly framesPerType: number
  /** Frames of each type the node read: answered, or refused at stream level (all framesPerType unless stopped early). */
  readonly sentPerType: Record<string, number>
  readonly stoppedEarly: boolean
  readonly framesPerSecond: number
  /** The whole run's projected time at the measured rate (for a run stopped early). */
  readonly projectedSeconds: number
  readonly framesSent: number
  /** Frames the node answered (the rest were behind a frame that ended their stream). */
  readonly framesAnswered: number
  readonly replies: Record<string, number>
  readonly mutations: Record<string, number>
  /** Frames written behind a stream-ending frame: never read by the node, replaced by fresh ones (not in framesSent). */
  readonly framesDropped: number
  readonly streamsEnded: number
  /** New streams the node ended before their first reply (per-peer limits); the fuzzer dialled again. */
  readonly reopenRefused: number
  /** Replies the node owed that did not come within a minute. */
  readonly replyTimeouts: number
  /** Replies of the node our own decoder refused. */
  readonly undecodableReplies: number
  readonly internalErrors: number
  readonly honestSteps: number
  readonly honestBitIdentical: boolean
  /** Why the honest session stopped, if it did (then honestBitIdentical is false). */
  readonly honestError?: string
  readonly nodeAlive: boolean
  readonly nodeHeapLimitMiB: number
  /** CPU time per delivered frame of the node process and of this one (the fuzzer's own frames, hosts and checks). */
  readonly cpuMsPerFrame: { readonly node: number; readonly fuzzer: number }
  readonly nodePeakRssMiB: number
  /** The node's memory at the start and every 1/memoryCheckpoints of the frames (live heap: after a full GC). */
  readonly nodeMemory: readonly MemoryCheckpoint[]
  /** Peak RSS against the stated bound, and whether live memory levelled off over the second half. */
  readonly nodeMemoryVerdict: MemoryVerdict
  /** What the node held for its peers before the attack and once every attacker left (a leak stays up). */
  readonly nodeRecords: { readonly before: Record<string, number>; readonly after: Record<string, number> }
  readonly seconds: number
}

/** The message type with the fewest frames delivered, and its count (the run ends when it is done). */
const slowest = (counts: Record<string, number>): string =>
  NODE_MESSAGE_TYPES.map((t) => `${t} ${counts[t] ?? 0}`).sort((a, b) => Number(a.split(' ')[1]) - Number(b.split(' ')[1]))[0]

/** Frames between two progress lines. */
const PROGRESS_FRAMES = 10_000

export async function fuzzNode(o: NodeFuzzOptions): Promise<NodeFuzzSummary> {
  const t0 = performance.now()
  const modelPath = o.model ?? defaultModelPath()
  const heapMiB = o.heapMiB ?? FUZZ_NODE_HEAP_MIB
  const node: LocalNode = await startMeasuredNode(modelPath, heapMiB)
  const hosts: Host[] = []
  const model = openModelFile(modelPath)
  const kernels = selectKernels({ kind: 'reference' })
  try {
    const dim = model.config.dim
    const target = node.addrs.map((a) => multiaddr(a))
    const honest = await createHost({ listen: [], pubsub: false })
    hosts.push(honest)
    for (let i = 0; i < (o.attackers ?? 4); i++) hosts.push(await createHost({ listen: [], pubsub: false }))
    const attackers = hosts.slice(1)

    // the honest session, checked against an in-process shard of the same span
    const local = createShard({ model, start: 1, end: 4, kernels })
    const rows = createEdge({ model, kernels }).embed(Array.from({ length: 64 }, (_, i) => (i * 37 + 1) % 500))
    const legit: SessionCaller = createSessionCaller(await honest.dialProtocol(target, SESSION_PROTOCOL, SESSION_STREAM_LIMITS))
    await legit.call({
      type: 'open',
      open: { sessionId: 'honest', modelId: node.modelId, start: 1, end: 4, maxLength: 64, wireDtype: 'f32', nextHops: [] }
    })
    local.openSession('honest', { maxLength: 64 })
    let honestPos = 0
    let honestSteps = 0
    let honestBitIdentical = true
    const honestStep = async (): Promise<void> => {
      const pos = honestPos % 64
      if (pos === 0 && honestPos > 0) {
        await legit.call({ type: 'rewind', rewind: { sessionId: 'honest', length: 0 } })
        local.rewind('honest', 0)
      }
      const input = rows.subarray(pos * dim, (pos + 1) * dim)
      const res = await legit.call({
        type: 'step',
        step: {
          sessionId: 'honest',
          stepId: ++honestSteps,
          startPosition: pos,
          hidden: encodeTensor(input, [1, dim], 'f32'),
          chain: false
        }
      })
      const want = local.forward('honest', input, pos)
      const got = res.type === 'result' && res.result.hidden ? decodeTensor(res.result.hidden) : new Float32Array(0)
      if (
        Buffer.compare(
          Buffer.from(got.buffer, got.byteOffset, got.byteLength),
          Buffer.from(want.buffer, want.byteOffset, want.byteLength)
        ) !== 0
      )
        honestBitIdentical = false
      honestPos++
    }

    const tally = createTally()
    const cpu0 = process.cpuUsage()
    const nodeCpu0 = cpuSeconds(node.process.pid as number)
    const strings = ['fz', 'fz.1', 'honest', node.modelId, node.peerId, ...attackers.map((h) => h.peerId.toString())]
    const perWorker = Math.ceil(o.frames / attackers.length)
    const total = perWorker * attackers.length * NODE_MESSAGE_TYPES.length
    const delivered = (): number => Object.values(tally.delivered).reduce((a, b) => a + b, 0)
    const memory = createMemoryCheckpoints(node, total, o.memoryCheckpoints ?? 10, t0, o.log)
    memory.poll(0)

    // the node logs every refused request: count its INTERNAL lines as they come, keep none
    let internalErrors = 0
    const drainLogs = (): void => {
      for (const l of node.logs.splice(0)) if (l.includes('"code":"INTERNAL"')) internalErrors++
    }

    // a progress line every PROGRESS_FRAMES frames, so a long run can be projected
    let nextProgress = PROGRESS_FRAMES
    const progress = (): void => {
      const sent = delivered()
      memory.poll(sent)
      if (sent < nextProgress) return
      nextProgress += PROGRESS_FRAMES
      drainLogs()
      const s = (performance.now() - t0) / 1000
      o.log?.(
        `node fuzz: ${sent}/${total} frames, ${Math.round(sent / s)} frames/s, ${Math.round(s)} s, ` +
          `node peak RSS ${peakRssMiB(node.process.pid as number)} MiB, slowest type ${slowest(tally.delivered)}`
      )
    }

    // the honest session steps once every honestEvery frames all through the run
    let fuzzing = true
    let honestError: string | undefined
    const honestLoop = async (): Promise<void> => {
      try {
        while (fuzzing) {
          if (delivered() >= honestSteps * (o.honestEvery ?? 500)) await honestStep()
          else await new Promise((r) => setTimeout(r, 20))
        }
      } catch (err) {
        // an honest step refused or lost is a failure of the run, reported with the summary
        honestError = `${errorCode(err) ?? ''} ${(err as Error).message}`.trim()
      }
    }
    const honestRun = honestLoop()

    // each attacker's connection is up before its lanes open their streams at once (the node's
    // libp2p resets a connection whose peer opens more than 10 streams before it is set up)
    await Promise.all(attackers.map((h) => fetchInfo(h, target)))
    // every attacker at once: a lane per session request type (each its own stream) and info lanes
    const lanes = attackers.flatMap((host, w) =>
      NODE_MESSAGE_TYPES.map((type, k) => {
        const ctx: FrameContext = { rng: createRng(o.seed * 1000 + w * 16 + k), strings, dim }
        const init = { host, target, modelId: node.modelId, ctx, tally, quota: perWorker, signal: o.signal, onProgress: progress }
        return type === 'info' ? infoLanes(init) : sessionLane(type, init)
      })
    )
    try {
      await Promise.all(lanes)
    } finally {
      fuzzing = false
      await honestRun
    }
    if (honestError === undefined) {
      try {
        for (let i = 0; i < 8; i++) await honestStep()
      } catch (err) {
        honestError = `${errorCode(err) ?? ''} ${(err as Error).message}`.trim()
      }
    }
    legit.abort(new Error('fuzz: done'))
    const nodeMemory = await memory.finish(delivered())
    const nodePeakRss = peakRssMiB(node.process.pid as number)
    await Promise.all(attackers.map((h) => h.stop()))
    const recordsBefore = nodeMemory[0]?.records ?? {}
    const recordsAfter = await settledRecords(memory.url, recordsBefore)
    drainLogs()
    const nodeAlive = node.process.exitCode === null && node.process.signalCode === null
    const seconds = (performance.now() - t0) / 1000
    const framesSent = delivered()
    const own = process.cpuUsage(cpu0)
    const fuzzerCpu = (own.user + own.system) / 1e6
    const nodeCpu = cpuSeconds(node.process.pid as number) - nodeCpu0
    return {
      target: 'node',
      seed: o.seed,
      framesPerType: perWorker * attackers.length,
      sentPerType: tally.delivered,
      stoppedEarly: framesSent < total,
      framesPerSecond: Math.round(framesSent / seconds),
      projectedSeconds: Math.round((total / framesSent) * seconds),
      framesSent,
      framesAnswered: tally.framesAnswered,
      framesDropped: tally.framesDropped,
      replies: tally.replies,
      mutations: tally.mutations,
      streamsEnded: tally.streamsEnded,
      reopenRefused: tally.reopenRefused,
      replyTimeouts: tally.replyTimeouts,
      undecodableReplies: tally.undecodableReplies,
      internalErrors,
      honestSteps,
      honestBitIdentical: honestBitIdentical && honestError === undefined,
      ...(honestError === undefined ? {} : { honestError }),
      nodeAlive,
      nodeHeapLimitMiB: heapMiB,
      cpuMsPerFrame: {
        node: Math.round((nodeCpu / framesSent) * 1e4) / 10,
        fuzzer: Math.round((fuzzerCpu / framesSent) * 1e4) / 10
      },
      nodePeakRssMiB: nodePeakRss,
      nodeMemory,
      nodeMemoryVerdict: memoryVerdict(nodeMemory, {
        heapLimitMiB: heapMiB,
        semiSpaceMiB: FUZZ_NODE_SEMI_SPACE_MIB,
        bytesInFlightMiB: DEFAULT_BYTES_IN_FLIGHT / 2 ** 20,
        kvMiB: ((node.kvBytes ?? 0) * DEFAULT_MAX_SESSIONS) / 2 ** 20,
        peakRssMiB: nodePeakRss
      }),
      nodeRecords: { before: recordsBefore, after: recordsAfter },
      seconds: Math.round((performance.now() - t0) / 100) / 10
    }
  } finally {
    await Promise.all(hosts.map((h) => h.stop()))
    await node.stop()
    kernels.close?.()
    model.close()
  }
}
