import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { ROOT } from './cli-doc.js'

// The shell commands of a Markdown page (issue 31 item 7): every fenced `sh` block, one entry
// per command (backslash continuations joined, `# …` comments cut), with the line it starts on,
// the `# prints: …` line that may follow it, and the plain fenced block after it when the prose
// between says the command prints it.

export interface DocCommand {
  readonly file: string
  readonly line: number
  /** The command as a user would type it, comments removed. */
  readonly text: string
  /** The JSON of a `# prints: {…}` line right after the command, if any. */
  readonly prints?: string
  /** A plain fenced block after the sh block, when the prose before it says "prints". */
  readonly output?: string
}

export function docCommands(file: string): DocCommand[] {
  const lines = readFileSync(join(ROOT, file), 'utf8').split('\n')
  const out: DocCommand[] = []
  for (let i = 0; i < lines.length; i++) {
    if (!/^\s*```sh\s*$/.test(lines[i])) continue
    const block: DocCommand[] = []
    let j = i + 1
    let pending: { line: number; text: string } | undefined
    for (; j < lines.length && !/^\s*```\s*$/.test(lines[j]); j++) {
      const raw = lines[j]
      const printed = /^\s*#\s*prints:\s*(.+)$/.exec(raw)
      if (printed && block.length > 0 && !pending) {
        const last = block.pop() as DocCommand
        block.push({ ...last, prints: printed[1].trim() })
        continue
      }
      const code = stripComment(raw)
      if (code.trim() === '' && !pending) continue
      const continued = /\\\s*$/.test(code)
      const piece = code.replace(/\\\s*$/, '').trim()
      pending = pending ? { line: pending.line, text: `${pending.text} ${piece}` } : { line: j + 1, text: piece }
      if (!continued) {
        block.push({ file, line: pending.line, text: pending.text.trim() })
        pending = undefined
      }
    }
    // "… prints, token for token …:" then a plain block: what the (last) command prints
    let k = j + 1
    let prose = ''
    while (k < lines.length && !/^\s*```/.test(lines[k]) && !/^#/.test(lines[k])) prose += `${lines[k++]} `
    if (k < lines.length && /^\s*```\s*$/.test(lines[k]) && /\bprints\b/.test(prose) && block.length > 0) {
      let end = k + 1
      while (end < lines.length && !/^\s*```\s*$/.test(lines[end])) end++
      const last = block.pop() as DocCommand
      block.push({ ...last, output: lines.slice(k + 1, end).join('\n') })
    }
    out.push(...block)
    i = j
  }
  return out
}

/** Cut a `#` comment that starts outside quotes, after whitespace or at the start. */
function stripComment(line: string): string {
  let quote: string | undefined
  for (let i = 0; i < line.length; i++) {
    const ch = line[i]
    if (quote) {
      if (ch === quote) quote = undefined
      continue
    }
    if (ch === "'" || ch === '"') quote = ch
    else if (ch === '#' && (i === 0 || /\s/.test(line[i - 1]))) return line.slice(0, i)
  }
  return line
}
