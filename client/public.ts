/**
 * `layerswarm/client`: the SDK. Join a swarm, generate verified text across its peers, and plug
 * in your own drafter or verification observer. The folder's full API (`client/index.ts`) is
 * internal; this list is the package's promise (docs/api.md, issue 36).
 *
 * @packageDocumentation
 * @example
 * ```ts
 * import { createClient } from 'layerswarm/client'
 *
 * const client = await createClient({
 *   bootstrap: ['/ip4/192.168.1.10/tcp/4001/p2p/12D3KooW…'],
 *   model: 'stories260K.gguf' // the same file the peers serve
 * })
 * const { text, report } = await client.generate('Once upon a time', { maxTokens: 64, temperature: 0 })
 * console.log(text, report.canaries)
 * for await (const { text } of client.stream('The dog', { maxTokens: 32, seed: 1 })) process.stdout.write(text)
 * await client.close()
 * ```
 */
import '../protocol/polyfills.js'

// The list: the client and its results; the choices a caller makes; two plug-in points (a
// `Drafter` for speculation, a `PipelineObserver` that sees every step, as verification does);
// the error classes a caller catches (each has a `code`).
export {
  BootstrapError,
  type CanaryOptions,
  type CanaryPeerReport,
  ClientError,
  type ClientInit,
  type CompletedStep,
  createClient,
  createNgramDrafter,
  type Draft,
  type Drafter,
  type Exclusion,
  type Forwarding,
  type GenerateOptions,
  type GenerateResult,
  LayerswarmClient,
  type NgramDrafterOptions,
  NoRouteError,
  PeerExcludedError,
  type PipelineObserver,
  type PipelineState,
  type RollbackEvent,
  type SpeculateMode,
  type StreamEvent,
  type TokenEvent,
  TooManyRollbacksError,
  type VerificationReport,
  type WirePreference
} from './index.js'
