import { generateKeyPair } from '@libp2p/crypto/keys'
import { type Command, Option } from 'commander'
import { parseBootstrapList } from '../../../../client/index.js'
import { WIRE_DTYPES } from '../../../../protocol/index.js'
import {
  computeModelId,
  DEFAULT_KV_DTYPE,
  type Kernels,
  KV_DTYPES,
  type ModelFile,
  openModelFile,
  readableModelName,
  type ShardLike
} from '../../../../shards/index.js'
import { SwarmNode } from '../../../daemon/index.js'
import { claimNodeIdentity } from '../../../identity-lock.js'
import { addLogLevelOption, createLogger, eventLog } from '../../../log.js'
import { DEFAULT_ANNOUNCE_INTERVAL_MS, DEFAULT_MAX_SESSIONS } from '../../../options.js'
import { BadOptionError } from '../../errors.js'
import { int, parseSpan, wireDtypeList } from '../../options.js'
import { checkListenAddrs, listenError, resolveModelArgument } from '../checks.js'
import { closeSpan, loadSpanBackend } from './node-backend.js'
import { measureThroughput } from './node-span.js'

/** One `MODEL:a:b` argument of `node serve` (issue 33 item 5). */
export interface ServeSpec {
  readonly model: string
  readonly layers: string
}

/**
 * `MODEL:a:b`, split from the right: a model argument may hold ':' itself (`hf://org/repo/f.gguf`,
 * `org/repo:Q4_K_M`), a span never does.
 */
export function parseServeSpec(text: string): ServeSpec {
  const m = /^(.+):(\d+:\d+)$/.exec(text)
  if (!m)
    throw new BadOptionError(`node serve ${text}: expected MODEL:a:b (serve blocks [a, b) of MODEL), e.g. stories260K.gguf:1:4`)
  return { model: m[1], layers: m[2] }
}

/** With a fixed TCP port, the i-th span listens on port + i (each span is its own peer); port 0 stays 0. */
export function listenFor(addrs: readonly string[], i: number): string[] {
  return addrs.map((a) => a.replace(/\/tcp\/(\d+)/, (_, p: string) => `/tcp/${Number(p) === 0 ? 0 : Number(p) + i}`))
}

interface Served {
  readonly node: SwarmNode
  readonly model: ModelFile
  readonly shard: ShardLike
  readonly kernels?: Kernels
  release(): void
}

export function registerNodeServe(program: Command): void {
  const node = program.commands.find((c) => c.name() === 'node') ?? program.command('node').description('Run a swarm peer.')
  const cmd = node.command('serve')
  addLogLevelOption(cmd)
  cmd
    .description(
      'Serve spans of several models from one process: `node serve A.gguf:0:4 B.gguf:0:2`. Each span is its own peer (peer id, announcement), ' +
        'so clients route to it exactly as to a `node start` peer. Prints one JSON line {peers: [{peerId, addrs, layers, modelId, modelName}]} once serving.'
    )
    .argument('<model:a:b...>', 'a model (file, hf://org/repo/file.gguf or org/repo:QUANT) and the blocks [a, b) to serve of it')
    .option('--listen <multiaddr...>', 'listen addresses of the first span; with a fixed port the i-th span takes port + i', [
      '/ip4/127.0.0.1/tcp/0'
    ])
    .option('--bootstrap <addrs>', 'comma-separated multiaddrs (with /p2p/<peer id>) of peers to join')
    .option('--ephemeral-identity', 'fresh keys for this run only, nothing written (local test swarms)', false)
    .addOption(new Option('--kernels <kind>', 'kernel set').choices(['auto', 'reference', 'wasm', 'native']).default('auto'))
    .addOption(new Option('--threads <n>', 'kernel threads (default: all cores)').argParser(int('--threads', 1)))
    .addOption(
      new Option('--kv-dtype <dtype>', 'KV cache storage of every span').choices([...KV_DTYPES]).default(DEFAULT_KV_DTYPE)
    )
    .addOption(
      new Option('--max-sessions <n>', 'sessions each span serves at once; more get BUSY')
        .argParser(int('--max-sessions', 1))
        .default(DEFAULT_MAX_SESSIONS)
    )
    .addOption(
      new Option('--wire <dtypes>', 'comma-separated activation dtypes every span accepts: f32, f16, q8_0')
        .argParser(wireDtypeList)
        .default([...WIRE_DTYPES], WIRE_DTYPES.join(','))
    )
    .addOption(
      new Option('--announce-interval <ms>', 'how often each span is announced over gossipsub')
        .argParser(int('--announce-interval', 100))
        .default(DEFAULT_ANNOUNCE_INTERVAL_MS)
    )
    .action(async (specTexts: string[], opts) => {
      // every argument checked (and every model fetched) before any peer starts
      const specs = specTexts.map(parseServeSpec)
      const listen = checkListenAddrs(opts.listen)
      const bootstrap: string[] = opts.bootstrap ? parseBootstrapList(String(opts.bootstrap)) : []
      const log = eventLog(createLogger({ level: opts.logLevel, name: 'layerswarm-node' }), 'info')
      const paths: string[] = []
      for (const s of specs) paths.push(await resolveModelArgument(s.model, '--model', { log }))
      const served: Served[] = []
      const stopAll = async (): Promise<void> => {
        for (const s of served.reverse()) {
          await s.node.stop()
          closeSpan(s.shard, s.kernels)
          s.model.close()
          s.release()
        }
      }
      try {
        for (const [i, spec] of specs.entries()) {
          const model = openModelFile(paths[i])
          const span = parseSpan(spec.layers, model.config.nLayers)
          const modelId = computeModelId(model)
          const claimed = opts.ephemeralIdentity ? undefined : await claimNodeIdentity(undefined)
          const privateKey = claimed?.identity.privateKey ?? (await generateKeyPair('Ed25519'))
          const { shard, kernels, hardware } = loadSpanBackend(model, span, { ...opts, backend: 'auto' }, log)
          const addrs = listenFor(listen, i)
          // the spans after the first also join through it, so one bootstrap address reaches them all
          const boot = [...bootstrap, ...(served[0]?.node.addrs.slice(0, 1) ?? [])]
          const swarmNode = await SwarmNode.create({
            listen: addrs,
            model,
            modelId,
            shard,
            throughput: measureThroughput(shard, model.config.dim),
            privateKey,
            bootstrap: boot,
            wireDtypes: opts.wire,
            maxSessions: opts.maxSessions,
            announceIntervalMs: opts.announceInterval,
            hardware,
            log
          }).catch((err: unknown) => {
            closeSpan(shard, kernels)
            model.close()
            claimed?.lock.release()
            throw listenError(addrs, err)
          })
          served.push({ node: swarmNode, model, shard, kernels, release: () => claimed?.lock.release() })
        }
      } catch (err) {
        await stopAll()
        throw err
      }
      const stopped = new Promise<string>((resolve) => {
        process.once('SIGINT', () => resolve('SIGINT'))
        process.once('SIGTERM', () => resolve('SIGTERM'))
      })
      const peers = served.map((s) => ({
        peerId: s.node.peerId,
        addrs: s.node.addrs,
        layers: [s.shard.start, s.shard.end],
        modelId: s.node.info().modelId,
        modelName: readableModelName(s.model)
      }))
      process.stdout.write(`${JSON.stringify({ peers })}\n`)
      const sig = await stopped
      // planned leave: every span answers LEAVING for a moment so clients move their sessions
      if (sig === 'SIGTERM') await Promise.all(served.map((s) => (s.node.sessions.active > 0 ? s.node.drain(3_000) : undefined)))
      await stopAll()
      if (sig === 'SIGINT') process.exitCode = 130
    })
}
