import { readFileSync } from 'node:fs'
import { isIP } from 'node:net'
import type { Command, Option } from 'commander'
import { ConfigError } from './errors.js'

/**
 * Options from a config file and the environment, for any commander command.
 *
 * Precedence, highest first: command line > environment (`LAYERSWARM_<OPTION>`, e.g.
 * `LAYERSWARM_API_KEY` for `--api-key`) > config file (`--config FILE` or `LAYERSWARM_CONFIG`,
 * a JSON object keyed by the option's long name, `"api-key"`, or its camelCase, `"apiKey"`) >
 * the option's default. Values from the environment and the file go through the option's own
 * parser and choices, so they are checked exactly like command-line values.
 */
export { ConfigError }

export const ENV_PREFIX = 'LAYERSWARM_'

/** The help text on precedence, its example taken from the command's own options. */
export function precedenceHelp(cmd?: Command): string {
  const names = (cmd?.options ?? []).map((o) => o.name())
  const example =
    names.find((n) => n === 'api-key') ?? names.find((n) => !['config', 'help', 'log-level'].includes(n)) ?? 'max-tokens'
  const env = ENV_PREFIX + example.toUpperCase().replace(/-/g, '_')
  return `
Every option can also come from the environment as ${ENV_PREFIX}<OPTION> (upper case, dashes as
underscores, e.g. ${env}) or from a JSON config file (--config FILE or
${ENV_PREFIX}CONFIG) keyed by option name ("${example}").
Precedence: command line > environment > config file > defaults.`
}

/** The precedence help with the --max-tokens example (kept for callers of the constant). */
export const PRECEDENCE_HELP = precedenceHelp()

export interface ConfigSupport {
  /** Options that must end up set from some source (commander's own check runs before the file is read). */
  readonly required?: readonly string[]
  readonly env?: NodeJS.ProcessEnv
}

/** `--max-tokens` → `LAYERSWARM_MAX_TOKENS`. */
export function envName(option: Option): string {
  return ENV_PREFIX + option.name().toUpperCase().replace(/-/g, '_')
}

/** Options each command checks itself after the config file (attribute names), for the docs check. */
const REQUIRED = new WeakMap<Command, readonly string[]>()

/** The options `cmd` requires from some source (command line, environment or config file). */
export function requiredOptionNames(cmd: Command): readonly string[] {
  return REQUIRED.get(cmd) ?? []
}

/** Add `--config FILE` to a command and fill options from the environment and the file before its action runs. */
export function withConfig(cmd: Command, support: ConfigSupport = {}): Command {
  REQUIRED.set(cmd, support.required ?? [])
  cmd.option('--config <file>', 'JSON file of option values (see precedence below)')
  // each command's own option as the example (only `api` has --api-key)
  cmd.addHelpText('after', () => precedenceHelp(cmd))
  cmd.hook('preAction', (self) => applyConfig(self, support))
  return cmd
}

/** Fill the options of `cmd` that were not given on the command line (see the precedence above). */
export function applyConfig(cmd: Command, support: ConfigSupport = {}): void {
  const env = support.env ?? process.env
  const file = cmd.getOptionValueSource('config') === 'cli' ? cmd.getOptionValue('config') : env[`${ENV_PREFIX}CONFIG`]
  const fileValues = file ? readConfigFile(String(file)) : {}
  const known = new Set<string>()
  for (const option of cmd.options) {
    const key = option.attributeName()
    const long = option.name()
    known.add(key).add(long)
    if (key === 'config' || key === 'help' || key === 'version') continue
    if (cmd.getOptionValueSource(key) === 'cli') continue
    const fromEnv = env[envName(option)]
    if (fromEnv !== undefined && fromEnv !== '') {
      cmd.setOptionValueWithSource(key, parseValue(option, fromEnv, envName(option)), 'env')
      continue
    }
    const fromFile = key in fileValues ? fileValues[key] : fileValues[long]
    if (fromFile !== undefined) cmd.setOptionValueWithSource(key, parseValue(option, fromFile, `${file}: "${long}"`), 'config')
  }
  // A misspelt key would otherwise be ignored without a word.
  const unknown = Object.keys(fileValues).filter((k) => !known.has(k))
  if (unknown.length > 0) throw new ConfigError(`${file}: unknown option${unknown.length > 1 ? 's' : ''} ${unknown.join(', ')}`)
  for (const name of support.required ?? []) {
    const option = cmd.options.find((o) => o.attributeName() === name || o.name() === name)
    if (option && cmd.getOptionValue(option.attributeName()) === undefined) {
      throw new ConfigError(`required option '${option.flags}' not specified (command line, ${envName(option)} or --config)`)
    }
  }
}

function readConfigFile(path: string): Record<string, unknown> {
  let text: string
  try {
    text = readFileSync(path, 'utf8')
  } catch (err) {
    throw new ConfigError(`cannot read config file ${path}: ${(err as Error).message}`)
  }
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch (err) {
    throw new ConfigError(`config file ${path} is not valid JSON: ${(err as Error).message}`)
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new ConfigError(`config file ${path} must hold a JSON object`)
  return value as Record<string, unknown>
}

function parseValue(option: Option, raw: unknown, where: string): unknown {
  // Flags without a value (`--json`): booleans, or the usual spellings of them in the environment.
  if (!option.required && !option.optional) {
    if (typeof raw === 'boolean') return option.negate ? !raw : raw
    const s = String(raw).toLowerCase()
    if (['1', 'true', 'yes', 'on'].includes(s)) return !option.negate
    if (['0', 'false', 'no', 'off'].includes(s)) return option.negate
    throw new ConfigError(`${where}: expected a boolean for ${option.flags}, got ${JSON.stringify(raw)}`)
  }
  const one = (v: unknown): unknown => {
    if (typeof v !== 'string' && typeof v !== 'number' && typeof v !== 'boolean') {
      throw new ConfigError(`${where}: expected a string or number for ${option.flags}, got ${JSON.stringify(v)}`)
    }
    const s = String(v)
    if (option.argChoices && !option.argChoices.includes(s)) {
      throw new ConfigError(`${where}: ${JSON.stringify(s)} is not one of ${option.argChoices.join(', ')} for ${option.flags}`)
    }
    if (!option.parseArg) return s
    try {
      return option.parseArg(s, undefined)
    } catch (err) {
      throw new ConfigError(`${where}: ${(err as Error).message}`)
    }
  }
  if (option.variadic) {
    const list = Array.isArray(raw) ? raw : String(raw).split(',').filter(Boolean)
    return list.map(one)
  }
  return one(raw)
}

/** "host:port", "[::1]:port" or ":port"/"port" (loopback) → parts; throws ConfigError. */
export function parseHostPort(text: string, what = 'address'): { host: string; port: number } {
  const m = /^(?:\[([^\]]+)\]|([^:[\]]*)):(\d+)$/.exec(text) ?? /^()()(\d+)$/.exec(text)
  const host = m ? m[1] || m[2] || '127.0.0.1' : ''
  const port = m ? Number(m[3]) : Number.NaN
  if (
    !m ||
    !Number.isInteger(port) ||
    port < 0 ||
    port > 65535 ||
    (host !== 'localhost' && isIP(host) === 0 && !/^[\w.-]+$/.test(host))
  ) {
    throw new ConfigError(`${what} ${JSON.stringify(text)}: expected HOST:PORT, e.g. 127.0.0.1:8080`)
  }
  return { host, port }
}

/** Only this machine can connect: 127.0.0.0/8, ::1, localhost. */
export function isLoopbackHost(host: string): boolean {
  const h = host.toLowerCase()
  return h === 'localhost' || h === '::1' || /^127\.\d+\.\d+\.\d+$/.test(h) || h === '::ffff:127.0.0.1'
}

/**
 * Give every command of a program (leaves of the command tree) `--config` and environment
 * support. Commander checks required options before any hook runs, so required options become
 * optional here and are checked after the config file and environment were applied.
 */
export function withConfigEverywhere(program: Command, skip: readonly string[] = []): void {
  const visit = (cmd: Command): void => {
    if (cmd.commands.length > 0) {
      for (const c of cmd.commands) visit(c)
      return
    }
    if (skip.includes(cmd.name()) || cmd.options.some((o) => o.attributeName() === 'config')) return
    const required: string[] = []
    for (const o of cmd.options) {
      if (o.mandatory) {
        o.mandatory = false
        required.push(o.attributeName())
      }
    }
    withConfig(cmd, { required })
  }
  visit(program)
}
