import type { AbortOptions } from '@libp2p/interface'
import { type Command, Option } from 'commander'
import { defaultModelsDir, fetchModel, type Seeder, serveWeights } from '../../../../client/index.js'
import { createHost, dialBootstrap, type Host } from '../../../../protocol/index.js'
import {
  computeModelId,
  contentModelId,
  fileSource,
  isContentModelId,
  type ModelFile,
  openModelFile,
  type WeightsSource
} from '../../../../shards/index.js'
import { defaultModelPath } from '../../../paths.js'
import { fileManifest } from '../../../weights/index.js'
import { BadOptionError } from '../../errors.js'
import { float, parseSpan } from '../../options.js'
import { checkReadableFile } from '../checks.js'
import { fetchProgress } from '../fetch-progress.js'
import { pickSpan } from './node-span.js'

/*
 * Issue 33, items 2-3: `node start` with a file seeds every tensor of it; with --model-id it
 * first fetches its span's tensors from the swarm (checked against the id), then serves the span
 * and seeds what it fetched.
 */

export function addWeightsOptions(cmd: Command): void {
  cmd
    .option(
      '--model-id <id>',
      'serve a span of the model with this content id (lsw1-…, the contentId a node started with the file prints) with no local file: its tensors are fetched from the swarm into $LAYERSWARM_HOME/models, checked, then served'
    )
    .option('--models-dir <dir>', 'where fetched models and file manifests are kept (default: $LAYERSWARM_HOME/models)')
    .addOption(
      new Option('--max-upload <MBps>', 'cap on weights served to peers, MB/s over all peers (0: none)')
        .argParser(float('--max-upload', 0))
        .default(0)
    )
    .addOption(
      new Option('--max-peer-upload <MBps>', 'cap on weights served to one peer, MB/s (0: none)')
        .argParser(float('--max-peer-upload', 0))
        .default(0)
    )
    .addOption(new Option('--tamper-weights', 'serve weights with one byte of each chunk flipped (a lying seeder)').hideHelp())
}

export interface NodeModel {
  readonly model: ModelFile
  /** The sampled id the node announces (shards/model/model-id.ts). */
  readonly modelId: string
  /** The content id its weights are served under. */
  readonly contentId?: string
  readonly span: [number, number]
  /** What the fetch did (with --model-id). */
  readonly fetched?: { neededBytes: number; fetchedBytes: number; reusedBytes: number; fileBytes: number; liars: number }
  /** Start seeding on the node's host. */
  serve(host: Host, options?: AbortOptions): Promise<Seeder | undefined>
}

interface Opts {
  model?: string
  modelId?: string
  modelsDir?: string
  layers?: string
  numBlocks?: number
  maxUpload: number
  maxPeerUpload: number
  tamperWeights?: boolean
}

/** The model a node serves, its id and span: opened from a file, or fetched by id. */
export async function openNodeModel(
  opts: Opts,
  bootstrap: string[],
  log: (e: Record<string, unknown>) => void,
  { signal }: AbortOptions = {}
): Promise<NodeModel> {
  const modelsDir = opts.modelsDir ?? defaultModelsDir()
  const seed = (source: WeightsSource | undefined) => async (host: Host, _options?: AbortOptions) =>
    source
      ? await serveWeights(host, [source], {
          maxUploadBytesPerSecond: opts.maxUpload * 1e6,
          maxPeerUploadBytesPerSecond: opts.maxPeerUpload * 1e6,
          tamper: opts.tamperWeights === true,
          log,
          signal
        })
      : undefined
  const pick = async (n: number, id: string): Promise<[number, number]> =>
    opts.layers ? parseSpan(opts.layers, n) : await pickSpan(n, opts.numBlocks ?? Math.ceil(n / 2), id, bootstrap)
  if (opts.modelId === undefined) {
    const path = checkReadableFile(opts.model ?? defaultModelPath(), '--model')
    const model = openModelFile(path)
    const modelId = computeModelId(model)
    const span = await pick(model.config.nLayers, modelId)
    if (model.format !== 'gguf') return { model, modelId, span, serve: seed(undefined) }
    const manifest = await fileManifest(path, modelId, modelsDir, { signal })
    const contentId = contentModelId(manifest)
    return { model, modelId, contentId, span, serve: seed(fileSource(path, contentId, manifest)) }
  }
  if (opts.model !== undefined) throw new BadOptionError('--model and --model-id exclude each other')
  if (!isContentModelId(opts.modelId))
    throw new BadOptionError(
      `--model-id ${opts.modelId}: not a content id (lsw1- and 64 hex digits: the contentId a node started with the file prints)`
    )
  if (bootstrap.length === 0) throw new BadOptionError('--model-id fetches the weights from the swarm: give --bootstrap')
  const host = await createHost({ listen: [], pubsub: false })
  try {
    await dialBootstrap(host, bootstrap, { signal })
    const bar = fetchProgress('fetching span')
    let span: [number, number] = [0, 0]
    const f = await fetchModel({
      host,
      contentId: opts.modelId,
      modelsDir,
      want: async (c, legacyId) => {
        span = await pick(c.nLayers, legacyId)
        // the last block's peer also answers `--head remote` steps (issue 35): it needs the head
        return { edge: false, head: span[1] === c.nLayers, blocks: [span] }
      },
      onProgress: (d, t) => bar.update(d, t),
      log,
      signal
    })
    bar.done()
    const r = f.report
    log({ event: 'weights-fetched', contentId: opts.modelId, ...r, liars: r.liars.map((l) => l.peerId) })
    return {
      model: f.model,
      modelId: f.legacyModelId,
      contentId: opts.modelId,
      span,
      fetched: {
        neededBytes: r.neededBytes,
        fetchedBytes: r.fetchedBytes,
        reusedBytes: r.reusedBytes,
        fileBytes: r.fileBytes,
        liars: r.liars.length
      },
      serve: seed(f.store)
    }
  } finally {
    await host.stop()
  }
}

/**
 * `join --model-id`: the model's block count and announced id, from its checked header (fetched
 * into the models folder; the child `node start --model-id` then fetches its span beside it).
 */
export async function modelInfoById(
  contentId: string,
  bootstrap: string[],
  modelsDir: string | undefined,
  { signal }: AbortOptions = {}
): Promise<{ modelId: string; nBlocks: number }> {
  if (bootstrap.length === 0) throw new BadOptionError('--model-id fetches the weights from the swarm: give --bootstrap')
  const host = await createHost({ listen: [], pubsub: false, bootstrap })
  try {
    const f = await fetchModel({
      host,
      contentId,
      ...(modelsDir ? { modelsDir } : {}),
      want: () => ({ edge: false, blocks: [] }),
      signal
    })
    const nBlocks = f.model.config.nLayers
    f.model.close()
    f.store.close()
    return { modelId: f.legacyModelId, nBlocks }
  } finally {
    await host.stop()
  }
}

/** The block count and id of a local file (join without --model-id). */
export function modelInfoOfFile(path: string): { modelId: string; nBlocks: number } {
  const model = openModelFile(path)
  try {
    return { modelId: computeModelId(model), nBlocks: model.config.nLayers }
  } finally {
    model.close()
  }
}
