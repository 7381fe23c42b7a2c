import { type Command, Option } from 'commander'
import { type Logger, pino } from 'pino'
import pretty from 'pino-pretty'

export type { Logger } from 'pino'

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const
export type LogLevel = (typeof LOG_LEVELS)[number]

export interface LoggerOptions {
  readonly level?: LogLevel
  readonly name?: string
  /** Where lines go; stderr by default, because stdout carries commands' JSON output. */
  readonly stream?: NodeJS.WritableStream & { isTTY?: boolean; fd?: number }
  /** Force pretty (true) or JSON lines (false); default: pretty exactly when the stream is a terminal. */
  readonly pretty?: boolean
}

/**
 * The pino logger of a command: human-readable lines (pino-pretty) on a terminal, JSON lines
 * otherwise, so pipes and log collectors get something they can parse.
 */
export function createLogger(o: LoggerOptions = {}): Logger {
  const stream = o.stream ?? process.stderr
  const level = o.level ?? 'info'
  const base = { name: o.name ?? 'layerswarm' }
  if (o.pretty ?? stream.isTTY === true) {
    // sync: a command that exits right after logging must not lose its last lines.
    return pino(
      { level, base },
      pretty({ destination: stream, sync: true, colorize: stream.isTTY === true, ignore: 'pid,hostname' })
    )
  }
  return pino(
    { level, base, timestamp: pino.stdTimeFunctions.isoTime },
    stream === process.stderr ? pino.destination({ fd: 2, sync: true }) : stream
  )
}

/** Add `--log-level` to a command. */
export function addLogLevelOption(cmd: Command): Command {
  return cmd.addOption(
    new Option('--log-level <level>', 'log verbosity (logs go to stderr: pretty on a terminal, JSON lines otherwise)')
      .choices([...LOG_LEVELS])
      .default('info')
  )
}

/** The `log` callback the client SDK and the node take ({event, ...}), onto a pino logger. */
export function eventLog(logger: Logger, level: 'info' | 'debug' = 'debug'): (e: Record<string, unknown>) => void {
  return (e) => {
    const { event, ...rest } = e
    logger[level](rest, typeof event === 'string' ? event : 'event')
  }
}

export interface Progress {
  /** Advance by `n` (default 1). */
  tick(n?: number): void
  /** Set the absolute count. */
  update(done: number): void
  /** Finish the bar (prints the final state and a newline on a terminal). */
  done(): void
}

const NO_PROGRESS: Progress = { tick() {}, update() {}, done() {} }

export interface ProgressOptions {
  readonly stream?: NodeJS.WritableStream & { isTTY?: boolean; columns?: number }
  /** Unit shown after the counts, e.g. "blocks" or "tokens". */
  readonly unit?: string
  /** Least time between redraws (default 100 ms): a tight loop must not flood the terminal. */
  readonly intervalMs?: number
}

/**
 * A progress bar for long work (loading weights, building canary sets, long prefills). It draws
 * only on a terminal; in a pipe or a log file it does nothing, since a bar there is noise.
 */
export function progress(label: string, total: number, o: ProgressOptions = {}): Progress {
  const stream = o.stream ?? process.stderr
  if (stream.isTTY !== true || !(total > 0)) return NO_PROGRESS
  const interval = o.intervalMs ?? 100
  const started = performance.now()
  let count = 0
  let lastDraw = 0
  let finished = false
  const draw = (force: boolean): void => {
    const now = performance.now()
    if (!force && now - lastDraw < interval) return
    lastDraw = now
    const frac = Math.min(1, count / total)
    const width = Math.max(10, Math.min(40, (stream.columns ?? 80) - label.length - 40))
    const full = Math.round(frac * width)
    const secs = (now - started) / 1000
    const rate = secs > 0 ? count / secs : 0
    const bar = '█'.repeat(full) + '░'.repeat(width - full)
    const unit = o.unit ? ` ${o.unit}` : ''
    stream.write(`\r\x1b[2K${label} ${bar} ${(frac * 100).toFixed(0).padStart(3)}% ${count}/${total}${unit} ${rate.toFixed(1)}/s`)
  }
  return {
    tick(n = 1) {
      if (finished) return
      count += n
      draw(false)
    },
    update(done) {
      if (finished) return
      count = done
      draw(false)
    },
    done() {
      if (finished) return
      finished = true
      draw(true)
      stream.write('\n')
    }
  }
}
