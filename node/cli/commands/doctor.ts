import { createServer } from 'node:net'
import { multiaddr } from '@multiformats/multiaddr'
import { type Command, Option } from 'commander'
import { bootstrapDialError, checkBootstrapAddress, SwarmView } from '../../../client/index.js'
import { createHost, fetchAnnouncements, fetchInfo } from '../../../protocol/index.js'
import {
  computeModelId,
  cpuInfo,
  errorCode,
  kernelChoiceOf,
  kernelChoiceSummary,
  openModelFile,
  selectKernels
} from '../../../shards/index.js'
import { defaultModelPath } from '../../paths.js'
import { DoctorFailedError } from '../errors.js'
import { int } from '../options.js'
import { ggmlDeviceLines } from './backend.js'
import { checkListenAddrs, checkReadableFile, listenError } from './checks.js'

type Verdict = 'ok' | 'warn' | 'FAIL'

interface Line {
  verdict: Verdict
  what: string
  text: string
}

function lineOf(err: unknown): string {
  const code = errorCode(err)
  return `${(err as Error).message.split('\n')[0]}${code ? ` (${code})` : ''}`
}

/** Can this machine listen on `addr` now? (A TCP bind and close; port 0 is always free.) */
async function tryListen(addr: string): Promise<void> {
  const parts = multiaddr(addr).getComponents()
  const host = parts.find((c) => ['ip4', 'ip6', 'dns', 'dns4', 'dns6'].includes(c.name))?.value ?? '127.0.0.1'
  const port = Number(parts.find((c) => c.name === 'tcp')?.value ?? 0)
  await new Promise<void>((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen({ host, port, exclusive: true }, () => server.close(() => resolve()))
  })
}

/** What one bootstrap address answered: its line, and (when it answered) the peer id and span. */
interface PeerCheck extends Line {
  peerId?: string
  span?: [number, number]
  /** Spans the announcements it holds name for its own peer id. */
  announcedSpans?: Array<[number, number]>
}

/** One bootstrap address, from a fresh host: a connection to the same peer by another address must not hide a bad one. */
async function checkBootstrapPeer(addr: string, modelId: string | undefined): Promise<PeerCheck> {
  try {
    checkBootstrapAddress(addr)
  } catch (err) {
    return { verdict: 'FAIL', what: 'bootstrap', text: lineOf(err) }
  }
  const host = await createHost({ listen: [], pubsub: false })
  try {
    const conn = await host.dial(multiaddr(addr), { signal: AbortSignal.timeout(10_000) })
    const { info, rttMs } = await fetchInfo(host, conn.remotePeer, { signal: AbortSignal.timeout(5_000) })
    let held = 'does not hand over announcements (an older version: clients rely on gossip)'
    const peerId = conn.remotePeer.toString()
    const announcedSpans: Array<[number, number]> = []
    try {
      const list = await fetchAnnouncements(host, conn.remotePeer, { signal: AbortSignal.timeout(5_000) })
      held = `holds ${list.length} announcement(s)`
      for (const { announcement: a } of list) if (a.peerId === peerId) announcedSpans.push([a.start, a.end])
    } catch {}
    const same = modelId === undefined ? '' : info.modelId === modelId ? ' (your model)' : ' (ANOTHER model than --model)'
    return {
      verdict: modelId !== undefined && info.modelId !== modelId ? 'warn' : 'ok',
      what: 'bootstrap',
      text: `${addr}: answers in ${rttMs.toFixed(1)} ms, serves blocks [${info.start}, ${info.end}) of ${info.modelId}${same}, ${held}`,
      peerId,
      span: [info.start, info.end],
      announcedSpans
    }
  } catch (err) {
    return { verdict: 'FAIL', what: 'bootstrap', text: lineOf(bootstrapDialError(addr, err as Error)) }
  } finally {
    await host.stop()
  }
}

/** Where a transport address ends and the peer id begins: `/ip4/…/tcp/N` of `/ip4/…/tcp/N/p2p/id`. */
function transportOf(addr: string): string {
  return addr.replace(/\/p2p\/[^/]+$/, '')
}

/**
 * Two nodes on one key file are one peer to the swarm (issue #31): two addresses answering with
 * one peer id, or a peer whose signed announcement names another span than the one it serves.
 */
export function duplicatedPeerIds(checks: ReadonlyArray<PeerCheck & { addr: string }>): Line[] {
  const out: Line[] = []
  const byPeer = new Map<string, Array<PeerCheck & { addr: string }>>()
  for (const c of checks) if (c.peerId) byPeer.set(c.peerId, [...(byPeer.get(c.peerId) ?? []), c])
  const fix = 'two nodes run on one key file and the swarm sees one peer; give each node its own --identity FILE'
  for (const [peerId, list] of byPeer) {
    const places = [...new Set(list.map((c) => transportOf(c.addr)))]
    if (places.length > 1) {
      const spans = list.map((c) => `[${c.span?.[0]}, ${c.span?.[1]})`).join(' and ')
      out.push({
        verdict: 'FAIL',
        what: 'identity',
        text: `duplicated peer id ${peerId}: ${places.join(' and ')} answer with it (serving ${spans}); ${fix}`
      })
      continue
    }
    const c = list[0]
    const other = c.announcedSpans?.find((s) => c.span && (s[0] !== c.span[0] || s[1] !== c.span[1]))
    // a warning only: a node that just moved its span (join) shows this until its next announcement
    if (other && c.span)
      out.push({
        verdict: 'warn',
        what: 'identity',
        text: `duplicated peer id ${peerId}: ${places[0]} serves [${c.span[0]}, ${c.span[1]}) but an announcement signed with its key names [${other[0]}, ${other[1]}) (a node that just moved its span shows this until it announces again; else ${fix})`
      })
  }
  return out
}

/** Issue 40: the CPU's SIMD features and where each dtype and shape class runs (measured once per machine). */
function kernelsLine(): Line {
  const cpu = cpuInfo()
  const k = selectKernels({ kind: 'auto' })
  try {
    const choice = kernelChoiceOf(k)
    const summary = choice ? kernelChoiceSummary(choice) : null
    const where = summary
      ? `native addon (${summary.isa}) for ${summary.native.length} dtype/shape classes${summary.wasm.length > 0 ? `, WebAssembly faster here for ${summary.wasm.join(' ')}` : ''}`
      : `${k.name} (no calibration: no native addon, or LAYERSWARM_CALIBRATE=0)`
    return {
      verdict: 'ok',
      what: 'kernels',
      text: `${cpu.model} (${cpu.arch}; ${cpu.flags.join(' ') || 'no SIMD flags read'}): ${where}`
    }
  } finally {
    k.close?.()
  }
}

export function registerDoctor(program: Command): void {
  program
    .command('doctor')
    .description(
      'Check the setup, one line each: the model file, the listen address, each bootstrap peer (reachable? which blocks? which model?) and how much of the model the swarm covers. Exits non-zero if a check fails.'
    )
    .option('--model <path>', 'model file (default: the bundled stories260K.gguf)')
    .option('--listen <multiaddr...>', 'listen addresses a node would use', ['/ip4/127.0.0.1/tcp/0'])
    .option('--bootstrap <addrs>', 'comma-separated multiaddrs (with /p2p/<peer id>) of swarm peers to check')
    .addOption(
      new Option('--edge-first <k>', 'blocks a client runs before the swarm').argParser(int('--edge-first', 0)).default(1)
    )
    .addOption(new Option('--edge-last <j>', 'blocks a client runs after the swarm').argParser(int('--edge-last', 0)).default(1))
    .action(async (opts) => {
      const lines: Line[] = []
      const say = (l: Line): void => {
        lines.push(l)
        process.stdout.write(`${l.verdict.padEnd(5)} ${l.what.padEnd(10)} ${l.text}\n`)
      }
      let modelId: string | undefined
      let nLayers = 0
      const modelPath = opts.model ?? defaultModelPath()
      try {
        const m = openModelFile(checkReadableFile(modelPath, '--model'))
        try {
          modelId = computeModelId(m)
          nLayers = m.config.nLayers
          say({
            verdict: 'ok',
            what: 'model',
            text: `${modelPath}: ${m.config.nLayers} blocks, dim ${m.config.dim}, context ${m.config.seqLen} tokens, id ${modelId}`
          })
        } finally {
          m.close()
        }
      } catch (err) {
        say({ verdict: 'FAIL', what: 'model', text: lineOf(err) })
      }
      for (const addr of opts.listen as string[]) {
        try {
          checkListenAddrs([addr])
          await tryListen(addr)
          say({ verdict: 'ok', what: 'listen', text: `${addr}: free` })
        } catch (err) {
          say({ verdict: 'FAIL', what: 'listen', text: lineOf(listenError([addr], err)) })
        }
      }
      const bootstrap = opts.bootstrap
        ? String(opts.bootstrap)
            .split(',')
            .map((x) => x.trim())
            .filter(Boolean)
        : []
      if (bootstrap.length === 0)
        say({ verdict: 'warn', what: 'bootstrap', text: 'none given: only local generation is checked' })
      if (bootstrap.length > 0) {
        const host = await createHost({ listen: [] })
        try {
          const checks: Array<PeerCheck & { addr: string }> = []
          for (const addr of bootstrap) {
            const c = await checkBootstrapPeer(addr, modelId)
            checks.push({ ...c, addr })
            say(c)
          }
          for (const l of duplicatedPeerIds(checks)) say(l)
          if (modelId !== undefined && nLayers > 0) {
            const good = bootstrap.filter((a) => {
              try {
                checkBootstrapAddress(a)
                return true
              } catch {
                return false
              }
            })
            const view = new SwarmView(host, modelId, good)
            await view.refresh()
            const [from, to] = [opts.edgeFirst, nLayers - opts.edgeLast]
            const covered = view.coveredBlocks(from, to)
            const missing = Array.from({ length: Math.max(0, to - from) }, (_, i) => from + i).filter((b) => !covered.includes(b))
            const peers = view.list().length
            say(
              missing.length === 0
                ? {
                    verdict: 'ok',
                    what: 'coverage',
                    text: `blocks ${from}..${to - 1} of ${nLayers} (the swarm's part; the client runs the other ${nLayers - (to - from)}) served by ${peers} peer(s)`
                  }
                : {
                    verdict: 'FAIL',
                    what: 'coverage',
                    text: `${covered.length} of ${to - from} swarm blocks served (${peers} peer(s)); nobody serves block(s) ${missing.join(', ')}`
                  }
            )
          }
        } finally {
          await host.stop()
        }
      }
      // what this machine computes with: information, not a check (last, so the checks keep their order)
      const k = kernelsLine()
      process.stdout.write(`${'info'.padEnd(5)} ${k.what.padEnd(10)} ${k.text}\n`)
      // issue 32: the ggml devices a node could serve on (`--backend ggml-…`, `--device N`)
      for (const d of ggmlDeviceLines()) process.stdout.write(`${'info'.padEnd(5)} ${'devices'.padEnd(10)} ${d}\n`)
      const failed = lines.filter((l) => l.verdict === 'FAIL').length
      if (failed > 0) throw new DoctorFailedError(`${failed} of ${lines.length} checks failed`)
    })
}
