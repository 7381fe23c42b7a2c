import { basename, extname } from 'node:path'
import type { AbortOptions } from '@libp2p/interface'
import {
  type BootstrapError,
  createClient,
  parseBootstrapList,
  parseWirePreference,
  type SpeculateMode,
  type WireChoice
} from '../../../client/index.js'
import { openModelFile, readableModelName } from '../../../shards/index.js'
import { parseHostPort } from '../../config.js'
import { Metrics, type MetricsServer, serveMetrics } from '../../daemon/index.js'
import { createChatFormatter } from '../../gateway/chat-template.js'
import { checkListen, type Gateway, startGateway } from '../../gateway/server.js'
import { createLogger, eventLog, type Logger, type LogLevel } from '../../log.js'
import { defaultModelPath } from '../../paths.js'
import { BadOptionError } from '../errors.js'
import { headInit } from '../head-options.js'
import { type SeedCliOptions, seedWeightsInit } from '../seed-options.js'
import { canaryBankInit } from '../verification-options.js'
import { checkReadableFile, listenError, resolveModelArgument } from './checks.js'

export interface ApiOptions extends SeedCliOptions {
  readonly bootstrap: string
  readonly model?: string
  /**
   * Issue 33: a content id (lsw1-…) instead of `model`: the gateway's client fetches what it runs
   * from the swarm, checked against the id (as `generate --model-id`), and seeds it on.
   */
  readonly modelId?: string
  readonly modelsDir?: string
  /** libp2p addresses the gateway's client listens on (peers fetch the weights it seeds there). */
  readonly p2pListen?: string[]
  readonly tokenizer?: string
  readonly modelName?: string
  readonly listen: string
  readonly apiKey?: string
  readonly maxConcurrent: number
  readonly edgeFirst: number
  readonly edgeLast: number
  readonly head?: string
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

/** What the gateway reads of the model file's header: its chat template, context and readable name. */
function modelMeta(path: string, tokenizer?: string): { template: unknown; contextLength: number; displayName: string } {
  const file = openModelFile(path, tokenizer !== undefined ? { tokenizerPath: tokenizer } : {})
  try {
    return {
      template: file.metadata.get('tokenizer.chat_template'),
      contextLength: file.config.seqLen,
      displayName: readableModelName(file)
    }
  } finally {
    file.close()
  }
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
  const byId = o.modelId !== undefined
  if (byId && o.model !== undefined) throw new BadOptionError('--model and --model-id exclude each other')
  const modelPath = byId ? undefined : await resolveModelArgument(o.model ?? defaultModelPath(), '--model')
  if (o.tokenizer !== undefined) checkReadableFile(o.tokenizer, '--tokenizer')
  // a file is read before joining (a bad file fails at once); by id, the header comes with the fetch
  let meta = modelPath !== undefined ? modelMeta(modelPath, o.tokenizer) : undefined
  const client = await createClient(
    {
      bootstrap,
      ...(byId
        ? { modelId: o.modelId, modelsDir: o.modelsDir, seedWeights: seedWeightsInit(o) }
        : { model: modelPath, tokenizer: o.tokenizer }),
      ...(o.p2pListen?.length ? { listen: o.p2pListen } : {}),
      edgeFirst: o.edgeFirst,
      ...headInit(o.head, o.edgeLast),
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
  try {
    meta ??= modelMeta(client.fetchedWeights?.path as string)
  } catch (err) {
    await client.close()
    throw err
  }
  const { template, contextLength, displayName } = meta
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
        // by id, clients pass the id the gateway was started with (or --model-name)
        modelName: o.modelName ?? (modelPath !== undefined ? basename(modelPath, extname(modelPath)) : (o.modelId as string)),
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
