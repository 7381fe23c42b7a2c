import { type Command, Option } from 'commander'
import { float } from './options.js'

/*
 * Issue 33: a client started by content id (`generate --model-id`, `api --model-id`) serves the
 * chunks it fetched to other peers, as every node does ("every node that has a tensor can serve
 * it"), under the same upload caps as `node start`. Peers reach it where it listens (--listen /
 * --p2p-listen) or over a connection it holds; --no-seed-weights turns it off.
 */

export interface SeedCliOptions {
  /** commander's --no-seed-weights: false when given. */
  readonly seedWeights?: boolean
  readonly maxUpload?: number
  readonly maxPeerUpload?: number
}

export function addSeedOptions(cmd: Command): Command {
  return cmd
    .option('--no-seed-weights', 'with --model-id: do not serve the chunks fetched to other peers (served by default)')
    .addOption(
      new Option('--max-upload <MBps>', 'with --model-id: cap on weights served to peers, MB/s over all peers (0: none)')
        .argParser(float('--max-upload', 0))
        .default(0)
    )
    .addOption(
      new Option('--max-peer-upload <MBps>', 'with --model-id: cap on weights served to one peer, MB/s (0: none)')
        .argParser(float('--max-peer-upload', 0))
        .default(0)
    )
}

/** ClientInit.seedWeights from the options. */
export function seedWeightsInit(
  o: SeedCliOptions
): false | { maxUploadBytesPerSecond: number; maxPeerUploadBytesPerSecond: number } {
  if (o.seedWeights === false) return false
  return { maxUploadBytesPerSecond: (o.maxUpload ?? 0) * 1e6, maxPeerUploadBytesPerSecond: (o.maxPeerUpload ?? 0) * 1e6 }
}
