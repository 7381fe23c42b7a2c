/**
 * Fuzzing a real node process (issue #17): fuzz frames of every request body and InfoRequests go
 * to a `layerswarm node start` child from several libp2p hosts, while an honest session opened
 * first keeps stepping and must give the bit-identical output of an in-process Shard. Every frame
 * must be answered (or its stream ended) with a typed error, never INTERNAL; the node must live.
 */
import { readFileSync } from 'node:fs'
import { multiaddr } from '@multiformats/multiaddr'
import { type LocalNode, startLocalNode } from '../../node/local-swarm.js'
import { defaultModelPath } from '../../node/paths.js'
import {
  createHost,
  createMessageChannel,
  createSessionCaller,
  decodeSessionResponse,
  decodeTensor,
  encodeTensor,
  type Host,
  INFO_PROTOCOL,
  type MessageChannel,
  SESSION_PROTOCOL,
  SESSION_STREAM_LIMITS,
  type SessionCaller
} from '../../protocol/index.js'
import { schema } from '../../protocol/schema.js'
import { createEdge, createShard, openModelFile, selectKernels } from '../../shards/index.js'
import { createRng, encode, type FrameContext, generate, type Mutation, mutate, validRequest } from './frames.js'

/** The bodies of a SessionRequest (protobufjs names) and the info request: the message types fuzzed. */
export const NODE_MESSAGE_TYPES = ['open', 'step', 'rewind', 'close', 'awaitResult', 'exportKv', 'importKv', 'info'] as const

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
  /** Stops the run early (SIGINT/SIGTERM): the summary counts what was sent and projects the rest. */
  readonly signal?: AbortSignal
  readonly log?: (line: string) => void
}

export interface NodeFuzzSummary {
  readonly target: 'node'
  readonly seed: number
  readonly framesPerType: number
  /** Frames of each type actually sent (all framesPerType unless stopped early). */
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
  readonly streamsEnded: number
  /** New streams the node ended before their first reply (per-peer limits); the fuzzer dialled again. */
  readonly reopenRefused: number
  readonly internalErrors: number
  readonly honestSteps: number
  readonly honestBitIdentical: boolean
  readonly nodeAlive: boolean
  readonly nodeHeapLimitMiB: number
  readonly nodePeakRssMiB: number
  readonly seconds: number
}

/** Frames in flight per stream: a frame that ends its stream loses the ones behind it. */
const WINDOW = 16
/** Frames between two progress lines. */
const PROGRESS_FRAMES = 10_000
/** Dials of a fresh stream before a worker gives up. */
const REOPEN_ATTEMPTS = 20
/** The node's V8 heap in the fuzz (NODE_OPTIONS): the bound its memory must stay under. */
export const FUZZ_NODE_HEAP_MIB = 1024

/** The process's peak resident set (VmHWM), or -1 once it is gone. */
function peakRssMiB(pid: number): number {
  try {
    const line = readFileSync(`/proc/${pid}/status`, 'utf8')
      .split('\n')
      .find((l) => l.startsWith('VmHWM:'))
    return Math.round(Number(line?.split(/\s+/)[1]) / 1024)
  } catch {
    return -1
  }
}

export async function fuzzNode(o: NodeFuzzOptions): Promise<NodeFuzzSummary> {
  const t0 = performance.now()
  const modelPath = o.model ?? defaultModelPath()
  const heapMiB = o.heapMiB ?? FUZZ_NODE_HEAP_MIB
  const node: LocalNode = await startLocalNode({
    model: modelPath,
    layers: '1:4',
    args: ['--kernels', 'reference'],
    // a node with an ordinary host's heap: memory that grew with the frames would kill it
    env: { ...process.env, NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --max-old-space-size=${heapMiB}`.trim() }
  })
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

    const replies: Record<string, number> = {}
    const mutations: Record<string, number> = {}
    let framesSent = 0
    let framesAnswered = 0
    let streamsEnded = 0
    let reopenRefused = 0
    const sentPerType: Record<string, number> = {}
    const strings = ['fz', 'fz.1', 'honest', node.modelId, node.peerId, ...attackers.map((h) => h.peerId.toString())]

    const count = (m: Record<string, number>, k: string): void => {
      m[k] = (m[k] ?? 0) + 1
    }

    // a progress line every PROGRESS_FRAMES frames, so a long run can be projected
    let nextProgress = PROGRESS_FRAMES
    const progress = (): void => {
      if (framesSent < nextProgress) return
      nextProgress += PROGRESS_FRAMES
      const s = (performance.now() - t0) / 1000
      const total = perWorker * attackers.length * NODE_MESSAGE_TYPES.length
      o.log?.(
        `node fuzz: ${framesSent}/${total} frames, ${Math.round(framesSent / s)} frames/s, ${Math.round(s)} s, ` +
          `node peak RSS ${peakRssMiB(node.process.pid as number)} MiB`
      )
    }

    // one worker per attacker, each through its share of every message type
    const perWorker = Math.ceil(o.frames / attackers.length)
    const worker = async (host: Host, w: number): Promise<void> => {
      const ctx: FrameContext = { rng: createRng(o.seed * 1000 + w), strings, dim }
      let channel: MessageChannel | undefined
      const reopen = async (): Promise<MessageChannel> => {
        channel?.abort(new Error('fuzz: next stream'))
        for (let attempt = 0; ; attempt++) {
          try {
            const ch = createMessageChannel(await host.dialProtocol(target, SESSION_PROTOCOL, SESSION_STREAM_LIMITS))
            // a session of our own, so steps and imports reach their deep paths (a duplicate is fine)
            await ch.write(
              schema.SessionRequest.encode({
                requestId: 1,
                open: { sessionId: 'fz', modelId: node.modelId, start: 1, end: 4, maxLength: 64, wireDtype: 0 }
              }).finish()
            )
            await ch.read({ signal: AbortSignal.timeout(30_000) })
            channel = ch
            return ch
          } catch (err) {
            // the node may end a new stream at once (its per-peer limits): back off and dial again
            reopenRefused++
            if (attempt >= REOPEN_ATTEMPTS) throw err
            await new Promise((r) => setTimeout(r, 50 * (attempt + 1)))
          }
        }
      }
      // round robin over the types, a window each, so a run stopped early has covered every type alike
      const sentOf: Record<string, number> = {}
      const sendInfo = async (): Promise<void> => {
        const frame = mutate(encode(schema.InfoRequest, generate(schema.InfoRequest, ctx), ctx), ctx)
        count(mutations, frame.mutation)
        const stream = await host.dialProtocol(target, INFO_PROTOCOL).catch(() => undefined)
        if (stream === undefined) {
          // refused by the node's per-peer limits: the frame is sent again
          reopenRefused++
          await new Promise((r) => setTimeout(r, 50))
          return
        }
        const ch = createMessageChannel(stream)
        await ch.write(frame.bytes).catch(() => {})
        await ch.close().catch(() => {})
        const r = await ch.read({ signal: AbortSignal.timeout(30_000) }).catch(() => undefined)
        count(replies, r === undefined ? 'info-refused' : 'info-answered')
        framesAnswered++
        ch.abort(new Error('done'))
        sentOf.info = (sentOf.info ?? 0) + 1
        framesSent++
        sentPerType.info = (sentPerType.info ?? 0) + 1
      }
      const sendWindow = async (type: string, sent: number): Promise<void> => {
        const ch = channel ?? (await reopen())
        const n = Math.min(WINDOW, perWorker - sent)
        for (let i = 0; i < n; i++) {
          // a quarter are valid requests at their limits (the deep paths), the rest schema-random
          const obj = ctx.rng() < 0.25 ? validRequest(type, ctx, node.modelId) : generate(schema.SessionRequest, ctx, 0, type)
          // mostly a valid request id, so the node answers the request and keeps the stream
          if (ctx.rng() < 0.95) obj.requestId = 2 + sent + i
          const frame = mutate(encode(schema.SessionRequest, obj, ctx), ctx)
          count(mutations, frame.mutation as Mutation)
          void ch.write(frame.bytes).catch(() => {})
        }
        sentOf[type] = sent + n
        framesSent += n
        sentPerType[type] = (sentPerType[type] ?? 0) + n
        for (let i = 0; i < n; i++) {
          const bytes = await ch.read({ signal: AbortSignal.timeout(60_000) }).catch(() => undefined)
          if (bytes === undefined) {
            streamsEnded++
            channel = undefined
            break
          }
          framesAnswered++
          const res = decodeSessionResponse(bytes)
          const key = res.type === 'error' ? res.error.code : res.type
          count(replies, key)
          if (res.type === 'error' && res.requestId === 0) {
            streamsEnded++
            channel = undefined
            break
          }
        }
      }
      for (let busy = true; busy && !o.signal?.aborted; ) {
        busy = false
        for (const type of NODE_MESSAGE_TYPES) {
          if (o.signal?.aborted) break
          const sent = sentOf[type] ?? 0
          if (sent >= perWorker) continue
          busy = true
          if (type === 'info') for (let k = 0; k < WINDOW && (sentOf.info ?? 0) < perWorker; k++) await sendInfo()
          else await sendWindow(type, sent)
          if (w === 0 && Math.floor(framesSent / (o.honestEvery ?? 500)) > honestSteps) await honestStep()
          progress()
        }
      }
      o.log?.(`worker ${w}: done`)
      channel?.abort(new Error('fuzz: done'))
    }
    await Promise.all(attackers.map((h, w) => worker(h, w)))
    for (let i = 0; i < 8; i++) await honestStep()
    legit.abort(new Error('fuzz: done'))
    const internalErrors = node.logs.filter((l) => l.includes('"code":"INTERNAL"')).length
    const nodeAlive = node.process.exitCode === null && node.process.signalCode === null
    const seconds = (performance.now() - t0) / 1000
    const total = perWorker * attackers.length * NODE_MESSAGE_TYPES.length
    return {
      target: 'node',
      seed: o.seed,
      framesPerType: perWorker * attackers.length,
      sentPerType,
      stoppedEarly: framesSent < total,
      framesPerSecond: Math.round(framesSent / seconds),
      projectedSeconds: Math.round((total / framesSent) * seconds),
      framesSent,
      framesAnswered,
      replies,
      mutations,
      streamsEnded,
      reopenRefused,
      internalErrors,
      honestSteps,
      honestBitIdentical,
      nodeAlive,
      nodeHeapLimitMiB: heapMiB,
      nodePeakRssMiB: peakRssMiB(node.process.pid as number),
      seconds: Math.round((performance.now() - t0) / 100) / 10
    }
  } finally {
    await Promise.all(hosts.map((h) => h.stop()))
    await node.stop()
    kernels.close?.()
    model.close()
  }
}
