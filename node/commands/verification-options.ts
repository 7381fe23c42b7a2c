import { dirname, join } from 'node:path'
import { type Command, Option } from 'commander'
import { STREAM_CHOICES, type StreamWhen } from './stream-writer.js'

/** What the verification options add to a swarm command's options (docs/verification.md). */
export interface VerificationCliOptions {
  stream?: StreamWhen
  verifiedStream?: boolean
  /** The canary secret's file (default: `canary-secret` beside --trust-file, else a fresh in-memory secret). */
  canarySecret?: string
  /** A text file the canary prompts are cut from (default: the model samples them). */
  canaryCorpus?: string
}

/** Adds the verification options to `generate` (used with --bootstrap). */
export function addVerificationOptions(cmd: Command): Command {
  return cmd
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
    ...(typeof opts.canaryCorpus === 'string' ? { canaryCorpus: opts.canaryCorpus } : {})
  }
}
