import { type Command, Option } from 'commander'
import { STREAM_CHOICES, type StreamWhen } from './stream-writer.js'

/** What the verification options add to a swarm command's options (docs/verification.md). */
export interface VerificationCliOptions {
  stream?: StreamWhen
  verifiedStream?: boolean
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
}

/** The verification options as runRemoteGenerate takes them. */
export function verificationOptions(opts: Record<string, unknown>): VerificationCliOptions {
  return { stream: opts.stream as StreamWhen, verifiedStream: opts.verifiedStream === true }
}
