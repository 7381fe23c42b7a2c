import { dirname, join } from 'node:path'
import { type Command, Option } from 'commander'
import { type CanaryBankInit, defaultBankKeyFile } from '../../client/index.js'
import { STREAM_CHOICES, type StreamWhen } from './stream-writer.js'

/** What the verification options add to a swarm command's options (docs/verification.md). */
export interface VerificationCliOptions {
  stream?: StreamWhen
  verifiedStream?: boolean
  /** The canary secret's file (default: `canary-secret` beside --trust-file, else a fresh in-memory secret). */
  canarySecret?: string
  /** A text file the canary prompts are cut from (default: the model samples them). */
  canaryCorpus?: string
  /** A sealed canary bank (`layerswarm canary build`) and its key file: a thin client's canaries. */
  canaryBank?: string
  canaryBankKey?: string
}

/** The options `--canary-bank` and `--canary-bank-key` add (generate and api). */
export function addCanaryBankOptions(cmd: Command): Command {
  return cmd
    .option(
      '--canary-bank <file>',
      'with --bootstrap: take canaries from this sealed bank (`layerswarm canary build`); the client then reads no weight of the blocks it does not run'
    )
    .option(
      '--canary-bank-key <file>',
      "the bank's key (hex, 0600); default: canary-bank-key beside --canary-secret, else beside the bank"
    )
}

/** The SDK's canaryBank for the options given (undefined without --canary-bank). */
export function canaryBankInit(o: {
  canaryBank?: string
  canaryBankKey?: string
  canarySecret?: string
}): CanaryBankInit | undefined {
  if (!o.canaryBank) return undefined
  const keyFile =
    o.canaryBankKey ?? (o.canarySecret ? join(dirname(o.canarySecret), 'canary-bank-key') : defaultBankKeyFile(o.canaryBank))
  return { path: o.canaryBank, keyFile }
}

/** Adds the verification options to `generate` (used with --bootstrap). */
export function addVerificationOptions(cmd: Command): Command {
  cmd
    .addOption(
      new Option(
        '--stream <when>',
        'with --bootstrap: stream tokens as they come (auto: on a terminal; a rollback after a conviction reprints the honest text), or print only the final, honest text'
      )
        .choices([...STREAM_CHOICES])
        .default('auto')
    )
    .option(
      '--verified-stream',
      'with --bootstrap: hold each token back until every peer that computed it has passed its canary start-up burst',
      false
    )
    .option(
      '--canary-secret <file>',
      'with --bootstrap: the secret every canary input derives from (hex, mode 0600, made on first use); default: canary-secret beside --trust-file, else a fresh secret per run'
    )
    .option('--canary-corpus <file>', 'with --bootstrap: cut canary prompts from this text (default: the model samples them)')
  return addCanaryBankOptions(cmd)
}

/** The verification options as runRemoteGenerate takes them. */
export function verificationOptions(opts: Record<string, unknown>): VerificationCliOptions {
  const canarySecret =
    typeof opts.canarySecret === 'string'
      ? opts.canarySecret
      : typeof opts.trustFile === 'string'
        ? join(dirname(opts.trustFile), 'canary-secret')
        : undefined
  return {
    stream: opts.stream as StreamWhen,
    verifiedStream: opts.verifiedStream === true,
    ...(canarySecret ? { canarySecret } : {}),
    ...(typeof opts.canaryCorpus === 'string' ? { canaryCorpus: opts.canaryCorpus } : {}),
    ...(typeof opts.canaryBank === 'string' ? { canaryBank: opts.canaryBank } : {}),
    ...(typeof opts.canaryBankKey === 'string' ? { canaryBankKey: opts.canaryBankKey } : {})
  }
}
