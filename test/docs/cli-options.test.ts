import type { Command, Option } from 'commander'
import { describe, expect, it } from 'vitest'
import { createProgram } from '../../node/cli/cli-program.js'
import { requiredOptionNames } from '../../node/config.js'
import { type DocOption, documentedOptions } from './cli-doc.js'

// Issue 31 item 7: every option docs/cli.md names exists on its command, with the default the
// page states. The commander program is built (node/cli/cli-program.ts) but never parsed or run.

/** Flags the page names that belong to other tools, each with why. */
const NOT_OURS: Record<string, string> = {
  '--no-install': "npm exec's flag (Running it from a clone)"
}
/** Commander's own flags, on every command though not in its option list. */
const BUILT_IN = new Set(['--help', '--version'])

const program = createProgram()

function findCommand(path: readonly string[]): Command | undefined {
  let cmd: Command | undefined = program
  for (const name of path) cmd = cmd?.commands.find((c) => c.name() === name || c.aliases().includes(name))
  return cmd
}

/** The command and its subcommands (`identity` → show, new): an option of any of them counts. */
function withSubcommands(cmd: Command): Command[] {
  return [cmd, ...cmd.commands.flatMap(withSubcommands)]
}

function optionOf(cmd: Command, flag: string): { owner: Command; option: Option } | undefined {
  for (const owner of withSubcommands(cmd)) {
    const option = owner.options.find((o) => o.long === flag || o.short === flag)
    if (option) return { owner, option }
  }
  return undefined
}

const allCommands = withSubcommands(program).filter((c) => c !== program)
const label = (path: readonly string[] | undefined): string => (path ? `layerswarm ${path.join(' ')}` : 'any command')

/** Why the stated default disagrees with the code, or undefined when it agrees. */
function defaultMismatch(owner: Command, option: Option, stated: string): string | undefined {
  const text = stated.trim()
  const actual: unknown = option.defaultValue
  const shown = actual === undefined ? 'no default' : `default ${JSON.stringify(actual)}`
  if (text === '') return undefined
  if (/^required$/i.test(text)) {
    return option.mandatory || requiredOptionNames(owner).includes(option.attributeName())
      ? undefined
      : `the page says required, the command does not require it (${shown})`
  }
  const number = /^(-?\d+(?:\.\d+)?)(?:\s*\([^)]*\)|\s+[a-z]+)?$/.exec(text)
  if (number) {
    return typeof actual === 'number' && actual === Number(number[1])
      ? undefined
      : `the page says ${number[1]}, the command has ${shown}`
  }
  const literal = /^`([^`]*)`(?:\s*\([^)]*\))?$/.exec(text) ?? /^"([^"]*)"$/.exec(text)
  if (literal) {
    // A default the action computes (a path under $LAYERSWARM_HOME, the bundled model): the help
    // text is where the code states it, so the page may name the value.
    if (actual === undefined && /\bdefault:/.test(option.description)) return undefined
    const value = Array.isArray(actual) ? actual.join(',') : actual === undefined ? undefined : String(actual)
    return value === literal[1] ? undefined : `the page says ${JSON.stringify(literal[1])}, the command has ${shown}`
  }
  // Prose ("off", "none", "all cores", "chosen", "bundled …"): no fixed value in the code either;
  // a negated flag (--no-hole-punch) defaults to true.
  if (actual === undefined || actual === false || (option.negate && actual === true)) return undefined
  return `the page gives a description (${JSON.stringify(text)}), the command has ${shown}: state the value, e.g. \`${String(actual)}\``
}

describe('docs/cli.md names only options that exist, with the defaults they have', () => {
  const documented = documentedOptions()

  it('the page was read (tables and prose)', () => {
    // a guard against the reader silently finding nothing after a layout change
    expect(documented.filter((d) => d.defaultText !== undefined).length).toBeGreaterThan(60)
    expect(new Set(documented.map((d) => d.command?.join(' '))).size).toBeGreaterThan(8)
  })

  it('every documented option exists on its command', () => {
    const problems: string[] = []
    for (const d of documented) {
      if (d.flag in NOT_OURS || BUILT_IN.has(d.flag)) continue
      if (d.command === undefined) {
        if (!allCommands.some((c) => c.options.some((o) => o.long === d.flag)))
          problems.push(`${d.where}: ${d.flag} is no option of any command`)
        continue
      }
      const cmd = findCommand(d.command)
      if (!cmd) {
        problems.push(`${d.where}: no command ${label(d.command)}`)
        continue
      }
      if (!optionOf(cmd, d.flag)) problems.push(`${d.where}: ${label(d.command)} has no option ${d.flag}`)
    }
    expect(problems).toEqual([])
  })

  it('every stated default is the one the command has', () => {
    const problems: string[] = []
    for (const d of documented as DocOption[]) {
      if (d.defaultText === undefined || d.command === undefined) continue
      const cmd = findCommand(d.command)
      const found = cmd && optionOf(cmd, d.flag)
      if (!found) continue // reported by the test above
      const why = defaultMismatch(found.owner, found.option, d.defaultText)
      if (why) problems.push(`${d.where}: ${label(d.command)} ${d.flag}: ${why}`)
    }
    expect(problems).toEqual([])
  })
})
