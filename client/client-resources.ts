import { generateKeyPair } from '@libp2p/crypto/keys'
import type { AbortOptions, PrivateKey } from '@libp2p/interface'
import { createHost, type Host } from '../protocol/index.js'
import { type ModelFile, openModelFile } from '../shards/index.js'
import type { ClientInit } from './client-types.js'
import { bundledModelPath } from './default-model.js'
import { DEFAULT_EDGE_FIRST, DEFAULT_EDGE_LAST } from './options.js'
import { edgeOnlyModel } from './verification/canaries/canary-bank-init.js'
import { type FetchedWeights, fetchClientModel } from './weights/client-fetch.js'
import type { Seeder } from './weights/seeder.js'

/**
 * What LayerswarmClient.create opens before it builds a client: the model file (only its edge
 * blocks when a canary bank spares the client building canaries on the whole model) and the
 * libp2p host. The model is closed again if the host does not start.
 */
export async function openClientResources(
  init: ClientInit,
  options: AbortOptions = {}
): Promise<{
  host: Host
  model: ModelFile
  fetched?: FetchedWeights
  privateKey: PrivateKey
  headReadable?: (id: number) => boolean
  seeder?: Seeder
}> {
  // the client's identity signs its KV grants (issue #41), so it keeps the key it starts with
  const privateKey = init.privateKey ?? (await generateKeyPair('Ed25519'))
  if (init.modelId !== undefined) return { ...(await fetchClientModel({ ...init, privateKey }, options)), privateKey }
  const file = openModelFile(
    init.model ?? bundledModelPath(),
    init.tokenizer !== undefined ? { tokenizerPath: init.tokenizer } : {}
  )
  const n = file.config.nLayers
  const thin = init.canaryBank && init.canaries !== false
  const model = thin
    ? edgeOnlyModel(
        file,
        init.edgeFirst ?? DEFAULT_EDGE_FIRST,
        n - (init.head === 'remote' ? 0 : (init.edgeLast ?? DEFAULT_EDGE_LAST))
      )
    : file
  try {
    const host = await createHost(
      {
        listen: [...(init.listen ?? [])],
        announce: [...(init.announce ?? [])],
        bootstrap: [...init.bootstrap],
        privateKey
      },
      options
    )
    return { host, model, privateKey }
  } catch (err) {
    model.close()
    throw err
  }
}
