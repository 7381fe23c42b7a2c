import type { ParsedCall, ToolFamily } from './tools-format.js'
import { ToolStream } from './tools-stream.js'

/** A rollback as the client's tool-aware stream sees it (issue 37, "verification stays visible"). */
export interface ToolRollback {
  /** Content characters kept (of the `content` this choice has sent). */
  readonly offset: number
  /** The honest content from `offset` on (so far). */
  readonly text: string
  /** Tool calls kept: calls sent with a higher index were void. */
  readonly keptCalls: number
  /** Calls of the honest text that are whole now (indices from `keptCalls` on). */
  readonly calls: ParsedCall[]
}

/**
 * One choice's tool stream that survives rollbacks. A rollback replaces the completion from a
 * character offset on; the ToolStream's state (a held `<tool_call>` block, Llama's held JSON,
 * Mistral's array) was built from text that is now void, so it is rebuilt from the kept text and
 * the rollback is said again in the terms the client saw: content characters and whole calls.
 */
export class RewindableToolStream {
  private stream: ToolStream
  private text = ''

  constructor(private readonly family: ToolFamily) {
    this.stream = new ToolStream(family)
  }

  push(text: string): { content: string; calls: ParsedCall[] } {
    this.text += text
    return this.stream.push(text)
  }

  /** The completion from character `offset` on is `text` now. */
  rollback(offset: number, text: string): ToolRollback {
    const kept = this.text.slice(0, offset)
    this.stream = new ToolStream(this.family)
    const before = this.stream.push(kept)
    const after = this.stream.push(text)
    this.text = kept + text
    return { offset: before.content.length, text: after.content, keptCalls: before.calls.length, calls: after.calls }
  }

  flush(): { content: string; calls: ParsedCall[] } {
    return this.stream.flush()
  }
}
