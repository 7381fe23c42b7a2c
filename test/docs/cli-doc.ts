import { readFileSync } from 'node:fs'
import { join } from 'node:path'

// Reads docs/cli.md into what it claims about options (issue 31 item 7): which options each
// command has and the defaults the page states. The page is written for people, so the reader
// is lenient about layout: option tables (first column `option`, second `default`), backticked
// option names anywhere in a section's prose, and prose defaults written right after an option
// as `--x` (N), `--x` (`v`), `--x` (default `v`…), `--x`, N; or `--x`, default "v".

export const ROOT = join(import.meta.dirname, '..', '..')

export interface DocSection {
  readonly title: string
  /** Command paths the heading names (`layerswarm node start` → ['node', 'start']); empty for other sections. */
  readonly commands: readonly string[][]
  /** The section's lines, fenced code blocks removed. */
  readonly text: string
}

export interface DocOption {
  /** `--max-tokens` */
  readonly flag: string
  /** The command path it is documented for; undefined: any command (sections such as Errors). */
  readonly command?: readonly string[]
  /** The default as written (a table cell, or a prose value), when the page states one. */
  readonly defaultText?: string
  /** Where: "docs/cli.md:123". */
  readonly where: string
}

const FLAG = /--[a-z][a-z0-9-]*/g

export function readDoc(file = 'docs/cli.md'): { sections: DocSection[]; lines: string[] } {
  const lines = readFileSync(join(ROOT, file), 'utf8').split('\n')
  return { sections: splitSections(lines), lines }
}

function splitSections(lines: string[]): DocSection[] {
  const sections: DocSection[] = []
  let title = ''
  let body: string[] = []
  let fenced = false
  const flush = (): void => {
    const commands = [...title.matchAll(/`layerswarm ([a-z][a-z -]*?)`/g)].map((m) => m[1].trim().split(/\s+/))
    sections.push({ title, commands, text: body.join('\n') })
  }
  lines.forEach((line, i) => {
    if (/^\s*```/.test(line)) {
      fenced = !fenced
      body.push('') // keep line numbers
      return
    }
    if (!fenced && /^##\s/.test(line)) {
      flush()
      title = line
      body = new Array(i + 1).fill('') // body lines keep their file line numbers
      return
    }
    body.push(fenced ? '' : line)
  })
  flush()
  return sections
}

/** Every option the page mentions, with the defaults it states. */
export function documentedOptions(file = 'docs/cli.md'): DocOption[] {
  const { sections } = readDoc(file)
  const out: DocOption[] = []
  for (const s of sections) {
    const own = s.commands.length > 0 ? s.commands : [undefined]
    const lines = s.text.split('\n')
    let inTable = false
    lines.forEach((line, i) => {
      const where = `${file}:${i + 1}`
      if (line.startsWith('|')) {
        const cells = line
          .slice(1, line.trimEnd().endsWith('|') ? line.trimEnd().length - 1 : undefined)
          .split(/(?<!\\)\|/)
          .map((c) => c.trim())
        if (/^option$/i.test(cells[0] ?? '') && /^default$/i.test(cells[1] ?? '')) {
          inTable = true
          return
        }
        if (!inTable || /^-+$/.test(cells[0] ?? '')) return
        const flags = [...(cells[0] ?? '').matchAll(/`(--[a-z][a-z0-9-]*)[^`]*`/g)].map((m) => m[1])
        const defaults = splitDefaults(cells[1] ?? '', flags.length)
        flags.forEach((flag, k) => {
          for (const command of own) out.push({ flag, command, defaultText: defaults[k], where })
        })
        // options named in the meaning column are mentions, without a default
        for (const m of mentions(cells.slice(2).join(' | ')))
          for (const command of own) out.push({ ...m, command: m.command ?? command, where })
        return
      }
      inTable = false
    })
    // prose: the lines outside tables, joined so a value on the next line still follows its option
    const prose = lines.map((l) => (l.startsWith('|') ? '' : l)).join('\n')
    const lineOf = (index: number): string => `${file}:${prose.slice(0, index).split('\n').length}`
    for (const m of mentions(prose)) {
      for (const command of m.command ? [m.command] : own) out.push({ ...m, command, where: lineOf(m.index) })
    }
  }
  return out
}

/** Cells such as "1, 1" or "all cores, `auto`" for a row naming two options. */
function splitDefaults(cell: string, n: number): (string | undefined)[] {
  const text = cell.trim()
  if (text === '') return new Array(n).fill(undefined)
  if (n <= 1) return [text]
  // split at ", " outside backticks
  const parts: string[] = []
  let cur = ''
  let tick = false
  for (let i = 0; i < text.length; i++) {
    const ch = text[i]
    if (ch === '`') tick = !tick
    if (!tick && ch === ',' && text[i + 1] === ' ') {
      parts.push(cur.trim())
      cur = ''
      i++
      continue
    }
    cur += ch
  }
  parts.push(cur.trim())
  return parts.length === n ? parts : new Array(n).fill(text)
}

const VALUE = '(-?\\d+(?:\\.\\d+)?|`(?!--)[^`]+`|"[^"]*")'
/** Prose defaults right after an option (see the header comment). */
const PROSE_DEFAULT = new RegExp(
  `^(?:\\s*\\((?:default\\s+)?${VALUE}(?:\\s+[a-z]+)?\\)|\\s*\\(default\\s+${VALUE}[;,]|,\\s*(?:default\\s+)?${VALUE}\\s*[;)])`
)
/** A backticked span naming a command first (`node start --help-dev`): its options are that command's. */
const COMMAND_FIRST = /^(?:layerswarm\s+)?((?:node start)|[a-z][a-z-]+(?:\s+(?:show|new|build))?)\s/

interface Mention {
  readonly flag: string
  readonly command?: readonly string[]
  readonly defaultText?: string
  readonly index: number
}

function mentions(text: string): Mention[] {
  const out: Mention[] = []
  for (const span of text.matchAll(/`([^`]+)`/g)) {
    const inner = span[1]
    const flags = [...inner.matchAll(FLAG)]
    if (flags.length === 0) continue
    const lead = COMMAND_FIRST.exec(inner)
    const command = lead && !lead[1].startsWith('-') && KNOWN_COMMANDS.has(lead[1]) ? lead[1].split(/\s+/) : undefined
    const after = text.slice((span.index ?? 0) + span[0].length)
    // `--a`/`--b` (1, 1): a pair
    const pair = /^\/`(--[a-z][a-z0-9-]*)`\s*\((-?\d+(?:\.\d+)?),\s*(-?\d+(?:\.\d+)?)\)/.exec(after)
    if (flags.length === 1 && inner.trim() === flags[0][0] && pair) {
      out.push({ flag: flags[0][0], command, defaultText: pair[2], index: span.index ?? 0 })
      out.push({ flag: pair[1], command, defaultText: pair[3], index: span.index ?? 0 })
      continue
    }
    const d = flags.length === 1 && inner.trim() === flags[0][0] ? PROSE_DEFAULT.exec(after) : null
    const defaultText = d ? (d[1] ?? d[2] ?? d[3]) : undefined
    for (const f of flags)
      out.push({ flag: f[0], command, defaultText: f === flags[0] ? defaultText : undefined, index: span.index ?? 0 })
  }
  return out
}

const KNOWN_COMMANDS = new Set([
  'generate',
  'node start',
  'swarm',
  'join',
  'doctor',
  'api',
  'demo',
  'make-model',
  'tokenize',
  'inspect',
  'identity',
  'identity show',
  'identity new',
  'canary',
  'canary build',
  'verify-evidence'
])
