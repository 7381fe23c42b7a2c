/**
 * How the CLI ends: every error is one line `layerswarm: <message> (<code>)` on stderr with a
 * non-zero status (no stack trace, no help dump; LAYERSWARM_DEBUG=1 adds the stack), and the
 * process exits only once stdout and stderr are drained: `process.exit()` right after a large
 * write to a pipe would cut it (`generate --json | wc -c`).
 */
import { CommanderError } from 'commander'

/** commander's error codes → ours (commander's own names stay in its namespace). */
const COMMANDER_CODES: Record<string, string> = {
  'commander.invalidArgument': 'BAD_OPTION',
  'commander.optionMissingArgument': 'BAD_OPTION',
  'commander.missingArgument': 'BAD_OPTION',
  'commander.missingMandatoryOptionValue': 'MISSING_OPTION',
  'commander.conflictingOption': 'BAD_OPTION',
  'commander.unknownOption': 'UNKNOWN_OPTION',
  'commander.unknownCommand': 'UNKNOWN_COMMAND',
  'commander.excessArguments': 'BAD_OPTION'
}

/** Exit status and the line to print for an error that ended a command. */
export function describeError(err: unknown): { line?: string; status: number } {
  if (err instanceof CommanderError) {
    // --help and --version end with a CommanderError too, with status 0 and their text printed
    if (err.exitCode === 0 || err.code === 'commander.help' || err.code === 'commander.helpDisplayed')
      return { status: err.exitCode }
    const message = err.message.replace(/^error: /, '')
    return { line: `layerswarm: ${message} (${COMMANDER_CODES[err.code] ?? 'USAGE'})`, status: err.exitCode || 1 }
  }
  if (err instanceof Error && err.name === 'AbortError') return { status: 130 }
  const e = err instanceof Error ? err : new Error(String(err))
  const raw = (e as { code?: unknown }).code
  // Node's own codes (ENOENT, EADDRINUSE) and ours (BUSY, NO_ROUTE) alike; an error without one is a bug
  const code = typeof raw === 'string' && raw !== '' ? raw : 'INTERNAL'
  const message = e.message.split('\n')[0].replace(/^error: /, '') || e.name
  return { line: `layerswarm: ${message} (${code})`, status: 1 }
}

/** Print `err` as one line and set the exit status. */
export function reportError(err: unknown): void {
  const { line, status } = describeError(err)
  if (line) process.stderr.write(`${line}\n`)
  if (line && process.env.LAYERSWARM_DEBUG && err instanceof Error && err.stack) process.stderr.write(`${err.stack}\n`)
  process.exitCode = status
}

/** A warning the command goes on after: same one-line form. */
export function warn(err: Error & { code?: string }): void {
  process.stderr.write(`layerswarm: warning: ${err.message.split('\n')[0]} (${err.code ?? 'WARNING'})\n`)
}

/** Resolves once everything written to `stream` has been handed to the OS. */
async function drained(stream: NodeJS.WriteStream): Promise<void> {
  if (stream.destroyed || stream.writableEnded) return
  await new Promise<void>((resolve) => {
    // a zero-length write completes after every write queued before it
    stream.write('', () => resolve())
  })
  while (stream.writableLength > 0 && !stream.destroyed)
    await new Promise<void>((resolve) => {
      stream.once('drain', () => resolve())
      stream.once('close', () => resolve())
    })
}

/**
 * Exit with process.exitCode after stdout and stderr drained. Exiting at all is needed:
 * kernel worker threads, gossipsub timers and sockets must not keep a finished command alive.
 */
export async function exitWhenDrained(): Promise<never> {
  await Promise.all([drained(process.stdout), drained(process.stderr)])
  process.exit(process.exitCode ?? 0)
}
