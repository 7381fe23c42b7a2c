import { basename, extname } from 'node:path'
import type { AbortOptions } from '@libp2p/interface'
import { type Command, Option } from 'commander'
import { DEFAULT_CANARY_RATE } from '../../../canary/index.js'
import {
  type BootstrapError,
  createClient,
  DEFAULT_SPECULATE,
  parseBootstrapList,
  parseWirePreference,
  type SpeculateMode,
  WIRE_CLI_CHOICES,
  type WireChoice
} from '../../../client/index.js'
import { openModelFile, readableModelName } from '../../../shards/index.js'
import { parseHostPort, withConfig } from '../../config.js'
import { Metrics, type MetricsServer, serveMetrics } from '../../daemon/index.js'
import { createChatFormatter } from '../../gateway/chat-template.js'
import { checkListen, type Gateway, startGateway } from '../../gateway/server.js'
import { addLogLevelOption, createLogger, eventLog, type Logger, type LogLevel } from '../../log.js'
import {
  DEFAULT_GATEWAY_LISTEN,
  DEFAULT_GATEWAY_MAX_CONCURRENT,
  DEFAULT_GATEWAY_MAX_CONNECTIONS,
  DEFAULT_GATEWAY_MAX_CONNECTIONS_PER_IP,
  DEFAULT_GATEWAY_MAX_MODEL_DOWNLOADS,
  DEFAULT_GATEWAY_REQUEST_TIMEOUT_MS
} from '../../options.js'
import { defaultModelPath } from '../../paths.js'
import { warn } from '../cli-exit.js'
import { float, int, SPECULATE_HELP, speculateOption } from '../options.js'
import { addCanaryBankOptions, canaryBankInit } from '../verification-options.js'
import { runModelsApi } from './api-models.js'
import { checkReadableFile, listenError, resolveModelArgument } from './checks.js'

export interface ApiOptions {
  readonly bootstrap: string
  readonly model?: string
  readonly tokenizer?: string
  readonly modelName?: string
  readonly listen: string
  readonly apiKey?: string
  readonly maxConcurrent: number
  readonly edgeFirst: number
  readonly edgeLast: number
  readonly forwarding: 'relay' | 'chain'
  /** auto, f32, f16, q8_0 (or its deprecated name int8): see client/session/wire-negotiation.ts. */
  readonly wire: WireChoice
  readonly canaryRate: number
  /** Speculative steps of every generation (client/speculation/speculation.ts). */
  readonly speculate?: SpeculateMode
  /** A sealed canary bank and its key file (a thin gateway: node/cli/commands/canary.ts). */
  readonly canaryBank?: string
  readonly canaryBankKey?: string
  readonly routeTimeout: number
  readonly metrics?: string
  /** Comma-separated ws:// multiaddrs the chat page dials (default: peers' /ws addresses the gateway learnt). */
  readonly browserBootstrap?: string
  /** ms a client has to send a whole request (issue #39); default DEFAULT_GATEWAY_REQUEST_TIMEOUT_MS. */
  readonly requestTimeout?: number
  readonly maxConnections?: number
  readonly maxConnectionsPerIp?: number
  readonly maxModelDownloads?: number
  readonly logLevel: LogLevel
}

export interface RunningApi {
  readonly gateway: Gateway
  readonly metrics?: MetricsServer
  /** Bootstrap addresses that could not be dialled at start (the gateway serves anyway). */
  readonly bootstrapFailed: BootstrapError[]
  close(): Promise<void>
}

/** Start the gateway: an SDK client on the swarm, the HTTP server, and optionally the metrics endpoint. */
export async function runApi(
  o: ApiOptions,
  log: Logger = createLogger({ level: o.logLevel, name: 'layerswarm-api' }),
  options: AbortOptions = {}
): Promise<RunningApi> {
  // Fail on a bad address before joining the swarm, not after.
  checkListen(o.listen, o.apiKey)
  if (o.metrics) parseHostPort(o.metrics, '--metrics')
  const bootstrap = parseBootstrapList(o.bootstrap)
  const modelPath = await resolveModelArgument(o.model ?? defaultModelPath(), '--model')
  if (o.tokenizer !== undefined) checkReadableFile(o.tokenizer, '--tokenizer')
  const file = openModelFile(modelPath, o.tokenizer !== undefined ? { tokenizerPath: o.tokenizer } : {})
  const template = file.metadata.get('tokenizer.chat_template')
  const contextLength = file.config.seqLen
  const displayName = readableModelName(file)
  file.close()
  const client = await createClient(
    {
      bootstrap,
      model: modelPath,
      tokenizer: o.tokenizer,
      edgeFirst: o.edgeFirst,
      edgeLast: o.edgeLast,
      forwarding: o.forwarding,
      wireDtype: parseWirePreference(o.wire),
      routeTimeoutMs: o.routeTimeout,
      canaries: o.canaryRate > 0 ? { rate: o.canaryRate } : false,
      speculate: o.speculate,
      canaryBank: canaryBankInit(o),
      log: eventLog(log.child({ component: 'client' }))
    },
    options
  )
  // one look at the swarm now, so a bad bootstrap address is reported at start, not per request
  await client.view.refresh(options).catch(() => {})
  const bootstrapFailed = client.view.lastRefresh.bootstrapFailed
  const tk = client.tokenizer
  const chat = createChatFormatter({
    template: typeof template === 'string' ? template : undefined,
    bosToken: tk.pieceOf(tk.bosId),
    eosToken: tk.pieceOf(tk.eosId),
    addsBos: tk.encode('').length > 0
  })
  const metrics = o.metrics ? new Metrics({ role: 'gateway' }) : undefined
  let gateway: Gateway | undefined
  let metricsServer: MetricsServer | undefined
  try {
    gateway = await startGateway(
      {
        client,
        listen: o.listen,
        apiKey: o.apiKey,
        modelName: o.modelName ?? basename(modelPath, extname(modelPath)),
        displayName,
        chat,
        contextLength,
        log,
        metrics,
        maxConcurrent: o.maxConcurrent,
        modelPath,
        browserBootstrap: o.browserBootstrap ? parseBootstrapList(o.browserBootstrap) : undefined,
        canaryBankPath: o.canaryBank,
        speculate: o.speculate,
        requestTimeoutMs: o.requestTimeout,
        maxConnections: o.maxConnections,
        maxConnectionsPerIp: o.maxConnectionsPerIp,
        maxModelDownloads: o.maxModelDownloads
      },
      options
    )
    if (metrics && o.metrics) metricsServer = await serveMetrics(o.metrics, metrics.registry, options)
  } catch (err) {
    await gateway?.close()
    await client.close()
    if (options.signal?.aborted) throw err
    throw listenError([o.listen], err)
  }
  log.info({ url: gateway.url, chat: chat.kind, auth: o.apiKey !== undefined, metrics: metricsServer?.url }, 'gateway listening')
  return {
    gateway,
    metrics: metricsServer,
    bootstrapFailed,
    async close() {
      // Generations still running would abort their libp2p streams on a host being stopped.
      for (const t0 = Date.now(); gateway.stats.active > 0 && Date.now() - t0 < 5_000; )
        await new Promise((r) => setTimeout(r, 50))
      await gateway.close()
      await metricsServer?.close()
      await client.close()
    }
  }
}

export function registerApi(program: Command): void {
  const cmd = program
    .command('api')
    .description(
      'OpenAI-compatible HTTP gateway to the swarm (/v1/models, /v1/completions, /v1/chat/completions) with a live status page at /. ' +
        'Prints one JSON line {url, model, metrics} once listening.'
    )
    .option('--bootstrap <addrs>', 'comma-separated multiaddrs (with /p2p/<peer id>) of swarm peers (required)')
    .option(
      '--model <path...>',
      "model the swarm serves (GGUF or llama2.c .bin, hf://org/repo/file.gguf, org/repo:QUANT); repeat it for several models, each named by its file, the request's 'model' picks one; default: the bundled stories260K.gguf"
    )
    .option('--tokenizer <path>', 'tokenizer for llama2.c .bin models')
    .option('--model-name <name>', "the id clients pass as 'model' (default: the model file's name without extension)")
    .option('--listen <host:port>', 'HTTP address; anything but loopback needs --api-key', DEFAULT_GATEWAY_LISTEN)
    .option('--api-key <key>', 'require "Authorization: Bearer KEY" on every API request (at least 8 characters)')
    .addOption(
      new Option('--max-concurrent <n>', 'generations at once; more get HTTP 429')
        .argParser(int('--max-concurrent', 1))
        .default(DEFAULT_GATEWAY_MAX_CONCURRENT)
    )
    .addOption(
      new Option(
        '--request-timeout <ms>',
        'a client must send each whole request (headers and body) within this, else 408 and the connection closes; answers being streamed are never cut'
      )
        .argParser(int('--request-timeout', 1))
        .default(DEFAULT_GATEWAY_REQUEST_TIMEOUT_MS)
    )
    .addOption(
      new Option('--max-connections <n>', 'HTTP connections held at once; more are closed on arrival')
        .argParser(int('--max-connections', 1))
        .default(DEFAULT_GATEWAY_MAX_CONNECTIONS)
    )
    .addOption(
      new Option('--max-connections-per-ip <n>', 'HTTP connections one client address holds at once; more are closed on arrival')
        .argParser(int('--max-connections-per-ip', 1))
        .default(DEFAULT_GATEWAY_MAX_CONNECTIONS_PER_IP)
    )
    .addOption(
      new Option(
        '--max-model-downloads <n>',
        'downloads of /model.gguf (the browser chat) at once; more get HTTP 503 with Retry-After'
      )
        .argParser(int('--max-model-downloads', 1))
        .default(DEFAULT_GATEWAY_MAX_MODEL_DOWNLOADS)
    )
    .addOption(
      new Option('--edge-first <k>', 'blocks the gateway runs itself before the swarm')
        .argParser(int('--edge-first', 0))
        .default(1)
    )
    .addOption(
      new Option('--edge-last <j>', 'blocks the gateway runs itself after the swarm').argParser(int('--edge-last', 0)).default(1)
    )
    .addOption(
      new Option('--forwarding <mode>', 'relay (gateway sends to each hop) or chain (hops forward)')
        .choices(['relay', 'chain'])
        .default('relay')
    )
    .addOption(new Option('--speculate <mode>', SPECULATE_HELP).argParser(speculateOption).default(DEFAULT_SPECULATE))
    .addOption(
      new Option(
        '--wire <dtype>',
        'activation dtype on the wire, per hop. auto: f16 where the hop accepts it (half the bytes of f32, same greedy tokens on the bundled model), else f32, else q8_0. f32/f16/q8_0 (GGUF Q8_0 blocks; int8 is a deprecated name for it): that dtype on every hop, routing around peers that do not accept it'
      )
        .choices([...WIRE_CLI_CHOICES])
        .default('auto')
    )
    .addOption(
      new Option(
        '--canary-rate <r>',
        'base fraction of steps followed by a canary check of each hop (new or suspect peers are checked more often); 0 = off'
      )
        .argParser(float('--canary-rate', 0, 1))
        .default(DEFAULT_CANARY_RATE)
    )
    .addOption(
      new Option('--route-timeout <ms>', 'how long a request waits for the swarm to cover the model')
        .argParser(int('--route-timeout', 0))
        .default(10_000)
    )
    .option(
      '--metrics <host:port>',
      'serve Prometheus metrics at http://HOST:PORT/metrics (a bare PORT binds 127.0.0.1; requests whose Host header names another site get 403)'
    )
    .option(
      '--browser-bootstrap <addrs>',
      'comma-separated ws multiaddrs (/ip4/…/tcp/N/ws/p2p/<id>) the browser chat page (/chat) dials; default: the /ws addresses of the peers the gateway knows'
    )
  addCanaryBankOptions(cmd)
  addLogLevelOption(cmd)
  withConfig(cmd, { required: ['bootstrap'] })
  cmd.action(async (opts: ApiOptions) => {
    const log = createLogger({ level: opts.logLevel, name: 'layerswarm-api' })
    // A libp2p stream torn down at a bad moment can reject where nobody listens; a gateway
    // serving many clients should log that, not exit.
    process.on('unhandledRejection', (err) => log.error({ err }, 'unhandled rejection'))
    // issue 33 item 5: several --model, one address; the request's model picks the gateway
    const models = [opts.model ?? []].flat()
    const many = models.length > 1 ? await runModelsApi(opts, models, runApi, log) : undefined
    const api = many ?? (await runApi({ ...opts, model: models[0] }, log))
    for (const f of many ? many.apis.flatMap((a) => a.bootstrapFailed) : (api as RunningApi).bootstrapFailed) warn(f)
    const line = many
      ? { url: many.url, models: many.models }
      : {
          url: (api as RunningApi).gateway.url,
          model: (api as RunningApi).gateway.modelName,
          metrics: (api as RunningApi).metrics?.url ?? null
        }
    process.stdout.write(`${JSON.stringify(line)}\n`)
    const sig = await new Promise<string>((resolve) => {
      process.once('SIGINT', () => resolve('SIGINT'))
      process.once('SIGTERM', () => resolve('SIGTERM'))
    })
    log.info('stopping')
    await api.close()
    // Ctrl-C ends with 130, as every command does (docs/cli.md); SIGTERM is a planned stop
    if (sig === 'SIGINT') process.exitCode = 130
  })
}
