import { createHmac } from 'node:crypto'
import { existsSync, mkdirSync, renameSync } from 'node:fs'
import { join } from 'node:path'
import { type CanaryTraces, loadCanaryBank, saveCanaryBank } from '../../../canary/index.js'
import { errorCode, type ModelConfig } from '../../../shards/index.js'

/**
 * Multiply-adds per canary position a first build may take at once (before the first token);
 * a larger one goes to the background (issue 31). 4·10⁹ is about a second of the client's own
 * kernels on this project's 2-core test host: the bundled and test models (260K parameters,
 * ~10⁹ in all) keep building at once, so their first generation is checked from its first
 * step; a 151k-vocabulary model's set (~10¹¹: 29 s of prompt sampling and 14 s of traces on that
 * host) no longer holds the first token.
 */
export const FIRST_BUILD_AT_ONCE_MACS = 4e9

/** Positions sampled per secret prompt (its length, at most 24, plus the 48 it may start after: canary-secret.ts). */
const PROMPT_POSITIONS = 64

/** Multiply-adds of one position through the whole model and its head (the work of sampling one token). */
export function macsPerPosition(c: ModelConfig): number {
  const attention = c.dim * (c.qDim + 2 * c.kvDim) + c.qDim * c.dim
  const ffn = 3 * c.dim * c.hiddenDim
  return c.nLayers * (attention + ffn) + c.vocabSize * c.dim
}

/** The multiply-adds of a first secret set: `count` prompts sampled, then traced to `length` positions. */
export function firstBuildMacs(c: ModelConfig, count: number, length: number, sampled: boolean): number {
  return count * ((sampled ? PROMPT_POSITIONS : 0) + length) * macsPerPosition(c)
}

/** Where a client's built secret canaries are kept between runs. */
export interface SecretSetStore {
  /** The set kept for this model and secret, or undefined (none, or unreadable: logged). */
  load(): CanaryTraces | undefined
  save(traces: CanaryTraces): void
  readonly path: string
}

/**
 * A client's secret canary set kept between runs (issue 31), so a returning client with a kept
 * secret (`--canary-secret`, `--trust-file`) has its canaries from its first step without
 * building them again: `<dir>/canaries/<model id>-<tag>.bank`, sealed like a canary bank
 * (canary/canary-bank.ts: AES-256-GCM, mode 0600 in a 0700 folder) under a key derived from the
 * secret, so the file is worthless without it; `tag` (also from the secret) keeps one secret's
 * set apart from another's. Nothing of it is ever sent to a peer.
 */
export function secretSetStore(
  dir: string,
  secret: Uint8Array,
  modelId: string,
  log?: (e: Record<string, unknown>) => void
): SecretSetStore {
  const mac = (label: string): Buffer => createHmac('sha256', secret).update(`layerswarm-canary-store:${label}`).digest()
  const key = new Uint8Array(mac('key'))
  const folder = join(dir, 'canaries')
  const path = join(folder, `${modelId}-${mac('name').toString('hex').slice(0, 16)}.bank`)
  return {
    path,
    load() {
      if (!existsSync(path)) return undefined
      try {
        const traces = loadCanaryBank(path, key, { modelId })
        log?.({ event: 'canary-store-loaded', path, canaries: traces.traces.length })
        return traces
      } catch (err) {
        // a stale or damaged file is rebuilt, never fatal: the set is a cache of what the secret gives
        log?.({ event: 'canary-store-ignored', path, code: errorCode(err), message: (err as Error).message })
        return undefined
      }
    },
    save(traces) {
      try {
        mkdirSync(folder, { recursive: true, mode: 0o700 })
        const part = `${path}.${process.pid}.part`
        saveCanaryBank(part, traces, key)
        renameSync(part, path) // whole or not at all: a run stopped mid-write leaves the old set
        log?.({ event: 'canary-store-saved', path, canaries: traces.traces.length })
      } catch (err) {
        log?.({ event: 'canary-store-error', path, message: (err as Error).message })
      }
    }
  }
}
