import { MISTRAL_CALLS, type ParsedCall, parseToolCalls, type ToolFamily } from './tools-format.js'

const OPEN = '<tool_call>'
const CLOSE = '</tool_call>'

/**
 * Tool calls out of streamed text (issue 37): text that is surely content goes on at once; a call
 * goes out whole when its block closes (OpenAI then streams the name and the arguments as
 * deltas). Text that may start a call is held until it is clear.
 */
export class ToolStream {
  private buffer = ''
  private inCall = false
  private decided = false
  private holdAll = false

  constructor(private readonly family: ToolFamily) {}

  push(text: string): { content: string; calls: ParsedCall[] } {
    this.buffer += text
    if (this.family === 'llama3') return this.pushLlama3()
    if (this.family === 'mistral') return this.pushMistral()
    let content = ''
    const calls: ParsedCall[] = []
    for (;;) {
      if (this.inCall) {
        const end = this.buffer.indexOf(CLOSE)
        if (end < 0) break
        const block = this.buffer.slice(0, end + CLOSE.length)
        this.buffer = this.buffer.slice(end + CLOSE.length)
        this.inCall = false
        const parsed = parseToolCalls('hermes', `${OPEN}${block}`)
        calls.push(...parsed.calls)
        if (parsed.calls.length === 0) content += `${OPEN}${block}`
        continue
      }
      const start = this.buffer.indexOf(OPEN)
      if (start >= 0) {
        content += this.buffer.slice(0, start)
        this.buffer = this.buffer.slice(start + OPEN.length)
        this.inCall = true
        continue
      }
      content += this.takeBefore(OPEN)
      break
    }
    return { content, calls }
  }

  /** The buffer but a tail that could be the start of `marker` (that stays held). */
  private takeBefore(marker: string): string {
    let keep = 0
    for (let k = Math.min(marker.length - 1, this.buffer.length); k > 0; k--) {
      if (marker.startsWith(this.buffer.slice(-k))) {
        keep = k
        break
      }
    }
    const out = this.buffer.slice(0, this.buffer.length - keep)
    this.buffer = this.buffer.slice(this.buffer.length - keep)
    return out
  }

  /** Mistral: content until `[TOOL_CALLS]`; from there the calls' array, parsed whole at the end. */
  private pushMistral(): { content: string; calls: ParsedCall[] } {
    if (this.inCall) return { content: '', calls: [] }
    const start = this.buffer.indexOf(MISTRAL_CALLS)
    if (start < 0) return { content: this.takeBefore(MISTRAL_CALLS), calls: [] }
    const content = this.buffer.slice(0, start)
    this.buffer = this.buffer.slice(start)
    this.inCall = true
    return { content, calls: [] }
  }

  private pushLlama3(): { content: string; calls: ParsedCall[] } {
    if (!this.decided) {
      const t = this.buffer.trimStart()
      if (t === '') return { content: '', calls: [] }
      this.decided = true
      this.holdAll = t.startsWith('{') || t.startsWith('<|python_tag|>')
    }
    if (this.holdAll) return { content: '', calls: [] }
    const content = this.buffer
    this.buffer = ''
    return { content, calls: [] }
  }

  /** The end of the completion: whatever is held. */
  flush(): { content: string; calls: ParsedCall[] } {
    const rest = this.inCall && this.family === 'hermes' ? `${OPEN}${this.buffer}` : this.buffer
    this.buffer = ''
    this.inCall = false
    if (rest === '') return { content: '', calls: [] }
    const parsed = parseToolCalls(this.family, rest)
    return { content: parsed.content ?? '', calls: parsed.calls }
  }
}
