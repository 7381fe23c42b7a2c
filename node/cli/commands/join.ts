/**
 * `layerswarm join [--model F] [--bootstrap list|file]`: one command to add a machine to a swarm.
 * It learns what the swarm serves from its announcements (SwarmView: the bootstrap peers' held
 * announcements, gossip, and an info request to every announced peer, so spans of peers the
 * bootstrap peers only heard of count too), picks the span that most raises the swarm's
 * bottleneck (span-selection.ts), and runs `node start --layers` for it as a child process with
 * a kept identity. Every --check-interval it looks again and moves when Petals' rule says the
 * bottleneck would rise by the stated margin (node/daemon/placement/rebalance.ts): the child leaves with a drain
 * (its clients move their sessions) and a new one starts on the new span, same peer id.
 * Prints one JSON line per event: {event: 'serving' | 'moving' | 'stopped', ...}.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { type Command, Option } from 'commander'
import { type PeerRecord, parseBootstrapList, SwarmView } from '../../../client/index.js'
import { createHost } from '../../../protocol/index.js'
import { chooseSpan, DEFAULT_BALANCE_QUALITY, type ServedSpan, shouldMove } from '../../daemon/index.js'
import { claimNodeIdentity } from '../../identity-lock.js'
import { defaultModelPath } from '../../paths.js'
import { BadOptionError, JoinedNodeExitedError } from '../errors.js'
import { float, int } from '../options.js'
import { deviceSizedBlocksOfFile } from './backend.js'
import { resolveModelArgument } from './checks.js'
import { chooseModelByDemand } from './join-model.js'
import { modelInfoById, modelInfoOfFile } from './node/node-weights.js'
import { refusedByEveryBootstrap } from './private-swarm.js'

const CLI = fileURLToPath(new URL('../../cli.js', import.meta.url))

/** `--bootstrap` is a comma-separated list, or a file with one address per line (# comments). */
export function readBootstrap(value: string): string[] {
  if (!value.startsWith('/') && existsSync(value)) {
    const lines = readFileSync(value, 'utf8')
      .split(/\r?\n/)
      .map((l) => l.replace(/#.*/, '').trim())
      .filter(Boolean)
    if (lines.length === 0) throw new BadOptionError(`--bootstrap ${value}: the file lists no address`)
    return parseBootstrapList(lines.join(','))
  }
  return parseBootstrapList(value)
}

interface Child {
  process: ChildProcess
  peerId: string
  layers: [number, number]
  exited: Promise<number | null>
}

async function startChild(args: string[]): Promise<Child> {
  const child = spawn(process.execPath, [CLI, 'node', 'start', ...args], { stdio: ['ignore', 'pipe', 'inherit'] })
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)))
  let out = ''
  const line = await new Promise<string>((resolve, reject) => {
    child.stdout!.on('data', (d) => {
      out += d
      const nl = out.indexOf('\n')
      if (nl >= 0) resolve(out.slice(0, nl))
    })
    exited.then((code) => reject(new JoinedNodeExitedError(`the node exited with status ${code} before serving`)))
  })
  const info = JSON.parse(line) as { peerId: string; layers: [number, number] }
  return { process: child, peerId: info.peerId, layers: info.layers, exited }
}

function emit(e: Record<string, unknown>): void {
  process.stdout.write(`${JSON.stringify(e)}\n`)
}

export function registerJoin(program: Command): void {
  program
    .command('join')
    .description(
      "Join a swarm: pick the blocks the swarm needs most from its announcements, serve them, and move when Petals' rule says the swarm's bottleneck would rise by the margin. Other `node start` options (--listen, --relay, --use-relay, --announce, --kernels...) are passed to the node."
    )
    .option('--model <path>', 'model file (GGUF or llama2.c .bin); default: the bundled stories260K.gguf')
    .option(
      '--model-id <id>',
      "instead of --model: the content id (lsw1-…) of a model the swarm serves; the node fetches its span. 'auto': the model the swarm needs most (demand against supply, docs/weights.md)"
    )
    .option('--models-dir <dir>', 'where --model-id keeps what it fetched (default: $LAYERSWARM_HOME/models)')
    .option('--bootstrap <list|file>', 'comma-separated multiaddrs, or a file with one per line')
    .addOption(
      new Option(
        '--num-blocks <n>',
        'blocks to serve (default: half the model; on a GPU backend, as many as its free memory holds)'
      ).argParser(int('--num-blocks', 1))
    )
    .option(
      '--identity <file>',
      'the node key file (refused while another node runs on it; default: the first of identity.key, identity-2.key, … in $LAYERSWARM_HOME, else ~/.layerswarm, that no running node holds)'
    )
    .addOption(
      new Option('--check-interval <ms>', 'how often to look at the swarm again')
        .argParser(int('--check-interval', 100))
        .default(60_000)
    )
    .addOption(
      new Option(
        '--balance-quality <q>',
        "move when the swarm's bottleneck now / after the move is below q (Petals' rule; 0.75: it must rise by more than a third)"
      )
        .argParser(float('--balance-quality', 0.01, 1))
        .default(DEFAULT_BALANCE_QUALITY)
    )
    .option('--verbose', 'log each look at the swarm to stderr', false)
    .allowUnknownOption()
    .allowExcessArguments()
    .action(async (opts, cmd: Command) => {
      if (opts.modelId !== undefined && opts.model !== undefined)
        throw new BadOptionError('--model and --model-id exclude each other')
      const modelPath = opts.modelId !== undefined ? '' : await resolveModelArgument(opts.model ?? defaultModelPath(), '--model')
      const bootstrap = opts.bootstrap ? readBootstrap(String(opts.bootstrap)) : []
      const passThrough = cmd.args.filter((a) => a !== modelPath)
      if (passThrough.includes('--layers')) throw new BadOptionError('join picks the span itself; --layers is for node start')
      // issue 33 item 3: `--model-id auto` serves the model whose demand most outruns its supply
      if (opts.modelId === 'auto') {
        const choice = await chooseModelByDemand(bootstrap)
        emit({ event: 'model-choice', contentId: choice.contentId, ranking: choice.ranking })
        opts.modelId = choice.contentId
      }
      // issue 33: by content id, the header is fetched (checked) for the block count and announced id
      const { modelId, nBlocks } =
        opts.modelId !== undefined ? await modelInfoById(opts.modelId, bootstrap, opts.modelsDir) : modelInfoOfFile(modelPath)
      // issue 32: on a GPU the span is as long as the device's free memory holds (a local file)
      const fit = opts.numBlocks === undefined && modelPath ? deviceSizedBlocksOfFile(modelPath, passThrough) : null
      if (fit)
        emit({
          event: 'device',
          backend: fit.backend,
          device: fit.device.description,
          freeBytes: fit.device.freeBytes,
          blocks: fit.blocks
        })
      const numBlocks = Math.min(nBlocks, opts.numBlocks ?? fit?.blocks ?? Math.ceil(nBlocks / 2))
      const ephemeral = passThrough.includes('--ephemeral-identity')
      // join holds the key's lock for every node start child it runs (each move restarts one on
      // the same key): the child sees its parent's pid in the lock and takes it as its own
      const claimed = ephemeral ? undefined : await claimNodeIdentity(opts.identity)
      const identityArgs = claimed ? ['--identity', claimed.identity.path] : []
      const host = await createHost({ listen: [], bootstrap })
      const view = new SwarmView(host, modelId, bootstrap)
      let child: Child | undefined
      // Only peers that answered this round: SwarmView keeps the record of a peer that vanished
      // (no connection, announcement expired) because it no longer asks it, so list() alone
      // would count a departed peer's blocks as served.
      const answered = (): PeerRecord[] => {
        const ok = new Set(view.lastRefresh.dialled.filter((d) => d.ok).map((d) => d.peerId))
        return view.list().filter((p) => ok.has(p.peerId) && p.modelId === modelId)
      }
      const spansOf = (self?: string): ServedSpan[] =>
        answered()
          .filter((p) => p.peerId !== self)
          .map((p) => ({ start: p.start, end: p.end, throughput: p.throughput }))
      const serve = async (layers: [number, number], swarm: ServedSpan[]): Promise<Child> => {
        const modelArgs =
          opts.modelId !== undefined
            ? ['--model-id', opts.modelId, ...(opts.modelsDir ? ['--models-dir', opts.modelsDir] : [])]
            : ['--model', modelPath]
        const args = [...modelArgs, '--layers', `${layers[0]}:${layers[1]}`, ...identityArgs, ...passThrough]
        if (bootstrap.length) args.push('--bootstrap', bootstrap.join(','))
        const c = await startChild(args)
        emit({ event: 'serving', peerId: c.peerId, layers: c.layers, modelId, swarm })
        return c
      }
      const stopped = new Promise<string>((resolve) => {
        process.once('SIGINT', () => resolve('SIGINT'))
        process.once('SIGTERM', () => resolve('SIGTERM'))
      })
      try {
        if (bootstrap.length) await view.refresh()
        // issue #38: serve only once the swarm let us in (every bootstrap peer refused our key: stop)
        const refused = refusedByEveryBootstrap(view.lastRefresh.bootstrapFailed, bootstrap.length)
        if (refused) throw refused
        const seen = spansOf()
        child = await serve(chooseSpan(nBlocks, numBlocks, seen), seen)
        for (;;) {
          const tick = new Promise<'tick'>((r) => setTimeout(() => r('tick'), opts.checkInterval))
          const why = await Promise.race([stopped, tick, child.exited.then(() => 'exited' as const)])
          if (why === 'exited') throw new JoinedNodeExitedError('the node stopped by itself (its log is above)')
          if (why !== 'tick') break
          await view.refresh()
          const own = answered().find((p) => p.peerId === child!.peerId)
          if (opts.verbose)
            process.stderr.write(
              `${JSON.stringify({ event: 'join-check', own: own ? [own.start, own.end, own.throughput] : null, others: spansOf(child.peerId), dialled: view.lastRefresh.dialled })}\n`
            )
          if (!own) continue // not announced yet (or not reachable from here): look again later
          const d = shouldMove(nBlocks, own, spansOf(child.peerId), opts.balanceQuality)
          if (!d.to) continue
          emit({
            event: 'moving',
            from: child.layers,
            to: d.to,
            bottleneckNow: d.bottleneckNow,
            bottleneckAfter: d.bottleneckAfter
          })
          // planned leave: the node drains (clients move their sessions), then the new span starts
          child.process.kill('SIGTERM')
          await child.exited
          child = await serve(d.to, spansOf(child.peerId))
        }
      } finally {
        if (child && child.process.exitCode === null) {
          child.process.kill('SIGTERM')
          await child.exited
        }
        await host.stop()
        claimed?.lock.release()
        emit({ event: 'stopped' })
      }
    })
}
