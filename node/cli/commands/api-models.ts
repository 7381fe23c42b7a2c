import { basename, extname } from 'node:path'
import type { AbortOptions } from '@libp2p/interface'
import { isContentModelId, openModelFile, readableModelName } from '../../../shards/index.js'
import { type ModelRouter, type RoutedModel, startModelRouter } from '../../gateway/model-router.js'
import type { Gateway } from '../../gateway/server.js'
import type { Logger } from '../../log.js'
import { BadOptionError } from '../errors.js'
import { resolveModelArgument } from './checks.js'

/** What runModelsApi needs of `api`'s options (api.ts's ApiOptions; not imported, as api.ts runs this). */
interface OneModelOptions {
  readonly model?: string
  readonly modelId?: string
  readonly p2pListen?: string[]
  readonly listen: string
  readonly apiKey?: string
  readonly modelName?: string
  readonly tokenizer?: string
  readonly metrics?: string
}

/** api.ts's runApi (passed in: it imports this file). */
type RunOne<O> = (o: O, log: Logger, options: AbortOptions) => Promise<RunningOne>
interface RunningOne {
  readonly gateway: Gateway
  readonly bootstrapFailed: readonly Error[]
  close(): Promise<void>
}

/** `layerswarm api --model A --model B`: what `api` runs for several models (issue 33 item 5). */
export interface RunningModelsApi {
  readonly url: string
  /** The ids clients pass as `model`, in the order given. */
  readonly models: readonly string[]
  readonly apis: readonly RunningOne[]
  readonly router: ModelRouter
  close(): Promise<void>
}

/**
 * One gateway per model (the SDK client of each routes by its model id in the swarm view, so the
 * peers of one model never carry another's steps), on loopback ports, behind one address whose
 * `model` field picks the gateway (node/gateway/model-router.ts).
 */
export async function runModelsApi<O extends OneModelOptions>(
  o: O,
  models: readonly string[],
  runApi: RunOne<O>,
  log: Logger,
  options: AbortOptions = {}
): Promise<RunningModelsApi> {
  // issue 33: a content id (`--model-id`) is fetched by its gateway's client and named by the id
  const paths: string[] = []
  for (const m of models)
    paths.push(isContentModelId(m) ? m : await resolveModelArgument(m, '--model', { signal: options.signal }))
  const names = paths.map((p) => (isContentModelId(p) ? p : basename(p, extname(p))))
  const twice = names.find((n, i) => names.indexOf(n) !== i)
  if (twice !== undefined)
    throw new BadOptionError(
      `--model: two models are named '${twice}'; rename one file (the name is what clients pass as 'model')`
    )
  if (o.modelName !== undefined)
    throw new BadOptionError('--model-name names one model; with several --model, each is named by its file')
  if (o.p2pListen?.length)
    throw new BadOptionError('--p2p-listen serves one model; with several models each gateway client dials out only')
  const apis: RunningOne[] = []
  const routed: RoutedModel[] = []
  try {
    for (const [i, path] of paths.entries()) {
      const byId = isContentModelId(path)
      // each model's own gateway, reachable only from this machine; the router is the door
      const api = await runApi(
        {
          ...o,
          ...(byId ? { model: undefined, modelId: path } : { model: path, modelId: undefined }),
          listen: '127.0.0.1:0',
          metrics: undefined
        },
        log.child({ model: names[i] }),
        options
      )
      apis.push(api)
      const client = api.gateway.client
      const file = openModelFile(
        client.fetchedWeights?.path ?? path,
        o.tokenizer !== undefined && !byId ? { tokenizerPath: o.tokenizer } : {}
      )
      const displayName = readableModelName(file)
      file.close()
      routed.push({
        name: names[i],
        modelId: client.modelId,
        displayName,
        gateway: api.gateway,
        coverage: () => {
          const peers = client.view.list()
          const nLayers = Math.max(0, ...peers.map((p) => p.nLayers))
          let blocksServed = 0
          for (let b = 0; b < nLayers; b++) if (peers.some((p) => b >= p.start && b < p.end)) blocksServed++
          return { blocksServed, nLayers, peers: peers.length }
        }
      })
    }
    const router = await startModelRouter({ listen: o.listen, apiKey: o.apiKey, models: routed }, options)
    log.info({ url: router.url, models: names }, 'gateway listening')
    return {
      url: router.url,
      models: names,
      apis,
      router,
      async close() {
        await router.close()
        for (const a of apis) await a.close()
      }
    }
  } catch (err) {
    for (const a of apis) await a.close()
    throw err
  }
}
