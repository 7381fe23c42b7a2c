import { generateKeyPair } from '@libp2p/crypto/keys'
import { type Command, Option } from 'commander'
import { createTamper, TAMPER_MODES, tamperingShard } from '../../../../canary/index.js'
import { bootstrapDialError, parseBootstrapList } from '../../../../client/index.js'
import { WIRE_DTYPES } from '../../../../protocol/index.js'
import { BACKENDS } from '../../../../shards/ggml/index.js'
import { DEFAULT_KV_DTYPE, KV_DTYPES, spanSlowReasons } from '../../../../shards/index.js'
import { Metrics, SwarmNode, serveMetrics } from '../../../daemon/index.js'
import { claimNodeIdentity } from '../../../identity-lock.js'
import { addLogLevelOption, createLogger, eventLog } from '../../../log.js'
import {
  DEFAULT_ANNOUNCE_INTERVAL_MS,
  DEFAULT_BATCH_WAIT_MS,
  DEFAULT_FIRST_STEP_TIMEOUT_MS,
  DEFAULT_IDLE_TIMEOUT_MS,
  DEFAULT_MAX_BATCH_ROWS,
  DEFAULT_MAX_QUEUED_STEPS,
  DEFAULT_MAX_SESSIONS,
  DEFAULT_ORPHAN_TIMEOUT_MS
} from '../../../options.js'
import { defaultModelPath } from '../../../paths.js'
import { warn } from '../../cli-exit.js'
import { BadOptionError, NoRelayReservationError } from '../../errors.js'
import { float, int, tamperHeadOption, wireDtypeList } from '../../options.js'
import { addReachabilityOptions, hostReachability, RELAY_WAIT_MS, relayedAddress } from '../../reachability-options.js'
import { checkListenAddrs, listenError, resolveModelArgument } from '../checks.js'
import { refusedByEveryBootstrap } from '../private-swarm.js'
import { closeSpan, kernelChoiceField, loadSpanBackend } from './node-backend.js'
import { measureThroughput } from './node-span.js'
import { addWeightsOptions, openNodeModel } from './node-weights.js'

export function registerNodeStart(program: Command): void {
  const node = program.commands.find((c) => c.name() === 'node') ?? program.command('node').description('Run a swarm peer.')
  const cmd = node.command('start')
  addLogLevelOption(cmd)
  cmd
    .description(
      'Serve a span of blocks of a model to the swarm. Prints one JSON line {peerId, addrs, layers, modelId} once serving.'
    )
    .option('--model <path>', 'model file (GGUF or llama2.c .bin); default: the bundled stories260K.gguf')
    .option('--layers <a:b>', 'serve blocks [a, b); default: the span that most raises the swarm bottleneck (Petals)')
    .addOption(
      new Option('--num-blocks <n>', 'blocks to serve when --layers is not given (default: half the model)').argParser(
        int('--num-blocks', 1)
      )
    )
    .option('--listen <multiaddr...>', 'listen addresses', ['/ip4/127.0.0.1/tcp/0'])
    .option('--bootstrap <addrs>', 'comma-separated multiaddrs (with /p2p/<peer id>) of peers to join')
    .option(
      '--identity <file>',
      'the key file that keeps this peer id across restarts (made, mode 0600, on first start; refused while another node runs on it; default: the first of identity.key, identity-2.key, … in $LAYERSWARM_HOME, else ~/.layerswarm, that no running node holds)'
    )
    .option('--ephemeral-identity', 'a fresh key for this run only, nothing written (local test swarms)', false)
  addReachabilityOptions(cmd)
  cmd
    // issue #31: kept so scripts that pass it still start; next hops are checked against the
    // swarm's signed announcements on any network (node/daemon/next-hop-policy.ts)
    .option(
      '--allow-private-next-hops',
      'deprecated, no effect: next hops on any network are checked against announcements',
      false
    )
    .addOption(
      new Option('--max-sessions <n>', 'sessions served at once; more get BUSY')
        .argParser(int('--max-sessions', 1))
        .default(DEFAULT_MAX_SESSIONS)
    )
    .addOption(
      new Option('--max-queued-steps <n>', 'steps waiting for the span at once; more get BUSY')
        .argParser(int('--max-queued-steps', 1))
        .default(DEFAULT_MAX_QUEUED_STEPS)
    )
    .addOption(
      new Option('--max-batch-rows <n>', "rows of several sessions' steps one batched forward takes at most")
        .argParser(int('--max-batch-rows', 1))
        .default(DEFAULT_MAX_BATCH_ROWS)
    )
    .addOption(
      new Option('--batch-wait-ms <ms>', 'wait this long for more steps before a batch (0: whatever is queued)')
        .argParser(int('--batch-wait-ms', 0))
        .default(DEFAULT_BATCH_WAIT_MS)
    )
    .addOption(
      new Option('--idle-timeout <ms>', 'free a session after this long without requests')
        .argParser(int('--idle-timeout', 1))
        .default(DEFAULT_IDLE_TIMEOUT_MS)
    )
    .addOption(
      new Option('--first-step-timeout <ms>', 'free a session that took no step this long after its open')
        .argParser(int('--first-step-timeout', 1))
        .default(DEFAULT_FIRST_STEP_TIMEOUT_MS)
    )
    .addOption(
      new Option('--orphan-timeout <ms>', "free an unused session this long after its owner's last connection closed")
        .argParser(int('--orphan-timeout', 1))
        .default(DEFAULT_ORPHAN_TIMEOUT_MS)
    )
    .addOption(
      new Option('--max-sessions-per-ip <n>', 'sessions one remote IP may hold (default: half of --max-sessions)').argParser(
        int('--max-sessions-per-ip', 1)
      )
    )
    .addOption(new Option('--threads <n>', 'kernel threads (default: all cores)').argParser(int('--threads', 1)))
    .addOption(new Option('--kernels <kind>', 'kernel set').choices(['auto', 'reference', 'wasm', 'native']).default('auto'))
    .addOption(
      new Option(
        '--backend <name>',
        'what runs the span: the engine (native, wasm), a ggml device (ggml-cpu, ggml-cuda, ggml-vulkan, ggml-metal; `layerswarm backend install`), or auto (a GPU that holds the span, else the engine)'
      )
        .choices([...BACKENDS])
        .default('auto')
    )
    .addOption(
      new Option('--device <n>', "index among the ggml backend's devices (`layerswarm doctor` lists them)")
        .argParser(int('--device', 0))
        .default(0)
    )
    .addOption(
      new Option('--kv-dtype <dtype>', 'KV cache storage, announced with the span (q8_0: GGUF Q8_0 blocks)')
        .choices([...KV_DTYPES])
        .default(DEFAULT_KV_DTYPE)
    )
    .addOption(
      new Option('--announce-interval <ms>', 'how often to announce the span over gossipsub')
        .argParser(int('--announce-interval', 100))
        .default(DEFAULT_ANNOUNCE_INTERVAL_MS)
    )
    .addOption(
      new Option('--tamper <mode>', 'for measuring the detector: return wrong outputs').choices([...TAMPER_MODES]).hideHelp()
    )
    .addOption(tamperHeadOption())
    .addOption(
      new Option(
        '--tamper-size <s>',
        'tamper strength (noise/bias: × output RMS; scale: factor − 1; zero: fraction; lowprec: mantissa bits)'
      )
        .argParser(float('--tamper-size', -1))
        .default(0.1)
        .hideHelp()
    )
    .addOption(
      new Option('--tamper-rate <r>', 'fraction of steps tampered')
        .argParser(float('--tamper-rate', 0, 1))
        .default(1)
        .hideHelp()
    )
    .addOption(
      new Option('--tamper-seed <n>', 'seed of the tampered-step choice').argParser(int('--tamper-seed', 0)).default(1).hideHelp()
    )
    .addOption(
      new Option('--tamper-after <pos>', 'tamper only rows at positions ≥ POS (a peer that cheats late in sessions)')
        .argParser(int('--tamper-after', 0))
        .default(0)
        .hideHelp()
    )
  addWeightsOptions(cmd)
  cmd
    .option('--help-dev', 'show the developer options too (a peer that returns wrong outputs, to measure the canary detector)')
    .option(
      '--metrics <host:port>',
      'serve Prometheus metrics at http://HOST:PORT/metrics (a bare PORT binds 127.0.0.1; requests whose Host header names another site get 403)'
    )
    .addOption(
      new Option(
        '--wire <dtypes>',
        'comma-separated activation dtypes this node accepts and announces: f32, f16, q8_0 (GGUF Q8_0 blocks; int8 is a deprecated name for it); sessions asking for another get UNSUPPORTED_DTYPE'
      )
        .argParser(wireDtypeList)
        .default([...WIRE_DTYPES], WIRE_DTYPES.join(','))
    )
    .addOption(
      new Option(
        '--busy-poll <ms>',
        'after each session request keep polling the network this long instead of sleeping (a core at 100% meanwhile; for dedicated machines, 0: off)'
      )
        .argParser(int('--busy-poll', 0))
        .default(0)
    )
    .addOption(
      new Option('--drain <ms>', 'on SIGTERM, wait this long for clients to move their sessions (planned leave)')
        .argParser(int('--drain', 0))
        .default(3_000)
    )
    .action(async (opts) => {
      if (opts.helpDev) {
        for (const o of cmd.options) o.hidden = false
        cmd.outputHelp()
        return
      }
      // Every input checked before any work: one typed line, not a trace from libp2p or the file reader.
      const net = hostReachability(opts, checkListenAddrs(opts.listen))
      const listen = net.listen
      if (opts.identity !== undefined && opts.ephemeralIdentity)
        throw new BadOptionError('--identity and --ephemeral-identity exclude each other')
      // hf://… and org/repo:QUANT download first; the weights path then opens the local file
      if (opts.modelId === undefined) opts.model = await resolveModelArgument(opts.model ?? defaultModelPath(), '--model')
      const bootstrap: string[] = opts.bootstrap ? parseBootstrapList(String(opts.bootstrap)) : []
      // pino: pretty on a terminal, JSON lines in a pipe (tests and log collectors read those)
      const log = eventLog(createLogger({ level: opts.logLevel, name: 'layerswarm-node' }), 'info')
      // Held while this node runs (node/identity-lock.ts): a second node never shares the key.
      const claimed = opts.ephemeralIdentity ? undefined : await claimNodeIdentity(opts.identity)
      const identity = claimed?.identity
      if (identity) log({ event: 'identity', path: identity.path, peerId: identity.peerId, created: identity.created })
      const privateKey = identity?.privateKey ?? (await generateKeyPair('Ed25519'))
      // issue 33: from the file, or fetched from the swarm by --model-id (node-weights.ts)
      const { model, modelId, contentId, span, fetched, serve } = await openNodeModel(opts, bootstrap, log)
      const [start, end] = span
      const { shard, kernels, report, hardware } = loadSpanBackend(model, [start, end], opts, log)
      const throughput = measureThroughput(shard, model.config.dim)
      const tamper = opts.tamper
        ? createTamper({
            mode: opts.tamper,
            size: opts.tamperSize,
            rate: opts.tamperRate,
            seed: opts.tamperSeed,
            after: opts.tamperAfter
          })
        : undefined
      if (tamper) log({ event: 'tampering', mode: tamper.mode, size: tamper.size, rate: tamper.rate, after: tamper.after })
      // a developer's tampering node runs the honest daemon on a lying span, wrapped here from outside
      const metrics = opts.metrics ? new Metrics({ role: 'node', labels: { span: `${start}:${end}` } }) : undefined
      const metricsServer = metrics
        ? await serveMetrics(opts.metrics, metrics.registry).catch((err: unknown) => {
            throw listenError([`--metrics ${opts.metrics}`], err)
          })
        : undefined
      metrics?.watchShard(shard)
      metrics?.watchMemory()
      if (metricsServer) log({ event: 'metrics', url: metricsServer.url })
      // Read (or made) before the model loads: a key others may read stops the start at once.
      const swarmNode = await SwarmNode.create({
        listen,
        announce: net.announce,
        reachability: net.reachability,
        model,
        modelId,
        shard: tamper ? tamperingShard(shard, tamper) : shard,
        tamperHead: opts.tamperHead,
        throughput,
        privateKey,
        bootstrap,
        traceRequests: opts.logLevel === 'trace',
        busyPollMs: opts.busyPoll,
        metrics,
        wireDtypes: opts.wire,
        maxSessions: opts.maxSessions,
        maxQueuedSteps: opts.maxQueuedSteps,
        maxBatchRows: opts.maxBatchRows,
        batchWaitMs: opts.batchWaitMs,
        idleTimeoutMs: opts.idleTimeout,
        firstStepTimeoutMs: opts.firstStepTimeout,
        orphanTimeoutMs: opts.orphanTimeout,
        maxSessionsPerIp: opts.maxSessionsPerIp,
        announceIntervalMs: opts.announceInterval,
        hardware,
        contentId,
        log
      }).catch(async (err: unknown) => {
        await metricsServer?.close()
        closeSpan(shard, kernels)
        model.close()
        throw listenError(listen, err)
      })
      // A node may start before its bootstrap peers, so it serves anyway; but say which failed.
      const bootFailed = swarmNode.bootstrapResult.failed.map((f) => bootstrapDialError(f.addr, f.error))
      // issue #38: refused at the swarm-key check by every bootstrap peer: not a member, so no serving
      const refused = refusedByEveryBootstrap(bootFailed, bootstrap.length)
      if (refused) {
        await swarmNode.stop()
        await metricsServer?.close()
        kernels?.close?.()
        model.close()
        claimed?.lock.release()
        throw refused
      }
      for (const f of bootFailed) warn(f)
      const seeder = await serve(swarmNode.host)
      // Behind NAT the relayed address is the one that matters: print the serving line with it.
      if (opts.useRelay && !(await relayedAddress(() => swarmNode.addrs)))
        warn(
          new NoRelayReservationError(
            `no relay granted a reservation within ${RELAY_WAIT_MS} ms (bootstrap a node started with --relay)`
          )
        )
      // Listen for signals before announcing we serve: a SIGTERM right after the line must stop us cleanly.
      const stopped = new Promise<string>((resolve) => {
        process.once('SIGINT', () => resolve('SIGINT'))
        process.once('SIGTERM', () => resolve('SIGTERM'))
      })
      process.stdout.write(
        `${JSON.stringify({ peerId: swarmNode.peerId, ...(identity ? { identity: identity.path } : {}), addrs: swarmNode.addrs, layers: [start, end], modelId, contentId, ...(fetched ? { fetched } : {}), kernels: report.kernels, weightBytes: report.weightBytes, kvBytes: report.kvBytes, kvDtype: shard.kvDType, kvMemory: report.kvMemory, backend: hardware.backend, ...(hardware.device ? { device: hardware.device } : {}), ...kernelChoiceField(kernels), ...(spanSlowReasons(report).length > 0 ? { slow: spanSlowReasons(report) } : {}) })}\n`
      )
      log({ event: 'serving', peerId: swarmNode.peerId, throughput })
      const sig = await stopped
      log({ event: 'stopping', signal: sig, sessions: swarmNode.sessions.active, busyPolledMs: swarmNode.busyPolledMs })
      // Planned leave: steps now get LEAVING, so each client exports its sealed KV and moves it.
      if (sig === 'SIGTERM' && swarmNode.sessions.active > 0 && opts.drain > 0) {
        await swarmNode.drain(opts.drain)
        log({ event: 'drained', sessions: swarmNode.sessions.active })
      }
      await seeder?.stop()
      await swarmNode.stop()
      await metricsServer?.close()
      closeSpan(shard, kernels)
      model.close()
      claimed?.lock.release()
      log({ event: 'stopped' })
      // Ctrl-C ends with 130, as every command does (docs/cli.md); SIGTERM is a planned stop
      if (sig === 'SIGINT') process.exitCode = 130
    })
}
