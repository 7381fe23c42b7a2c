import { createServer } from 'node:net'
import { multiaddr } from '@multiformats/multiaddr'
import { type Command, Option } from 'commander'
import { bootstrapDialError, checkBootstrapAddress, SwarmView } from '../../client/index.js'
import { createHost, fetchAnnouncements, fetchInfo } from '../../protocol/index.js'
import { computeModelId, cpuInfo, kernelChoiceOf, kernelChoiceSummary, openModelFile, selectKernels } from '../../shards/index.js'
import { defaultModelPath } from '../paths.js'
import { checkListenAddrs, checkReadableFile, listenError } from './checks.js'
import { DoctorFailedError } from './errors.js'
import { int } from './options.js'

type Verdict = 'ok' | 'warn' | 'FAIL'

interface Line {
  verdict: Verdict
  what: string
  text: string
}

function lineOf(err: unknown): string {
  const e = err as Error & { code?: string }
  return `${e.message.split('\n')[0]}${e.code ? ` (${e.code})` : ''}`
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

/** One bootstrap address, from a fresh host: a connection to the same peer by another address must not hide a bad one. */
async function checkBootstrapPeer(addr: string, modelId: string | undefined): Promise<Line> {
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
    try {
      const list = await fetchAnnouncements(host, conn.remotePeer, { signal: AbortSignal.timeout(5_000) })
      held = `holds ${list.length} announcement(s)`
    } catch {}
    const same = modelId === undefined ? '' : info.modelId === modelId ? ' (your model)' : ' (ANOTHER model than --model)'
    return {
      verdict: modelId !== undefined && info.modelId !== modelId ? 'warn' : 'ok',
      what: 'bootstrap',
      text: `${addr}: answers in ${rttMs.toFixed(1)} ms, serves blocks [${info.start}, ${info.end}) of ${info.modelId}${same}, ${held}`
    }
  } catch (err) {
    return { verdict: 'FAIL', what: 'bootstrap', text: lineOf(bootstrapDialError(addr, err as Error)) }
  } finally {
    await host.stop()
  }
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
      say(kernelsLine())
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
          for (const addr of bootstrap) say(await checkBootstrapPeer(addr, modelId))
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
      const failed = lines.filter((l) => l.verdict === 'FAIL').length
      if (failed > 0) throw new DoctorFailedError(`${failed} of ${lines.length} checks failed`)
    })
}
