/**
 * Cuts streamed text at the first stop sequence. Text that could still become the start of a
 * stop sequence is held back until the next piece decides it, so a client never receives part
 * of a stop sequence it asked not to see.
 */
export class StopMatcher {
  private pending = ''
  private stoppedAt = false

  constructor(private readonly stops: readonly string[]) {}

  get stopped(): boolean {
    return this.stoppedAt
  }

  /** Feed the next piece; returns the text safe to emit now. */
  push(piece: string): string {
    if (this.stoppedAt) return ''
    const text = this.pending + piece
    let cut = -1
    for (const s of this.stops) {
      const i = text.indexOf(s)
      if (i >= 0 && (cut < 0 || i < cut)) cut = i
    }
    if (cut >= 0) {
      this.stoppedAt = true
      this.pending = ''
      return text.slice(0, cut)
    }
    // Hold back the longest tail that is a proper prefix of some stop sequence.
    let hold = 0
    for (const s of this.stops) {
      for (let k = Math.min(s.length - 1, text.length); k > hold; k--) {
        if (text.endsWith(s.slice(0, k))) {
          hold = k
          break
        }
      }
    }
    this.pending = text.slice(text.length - hold)
    return text.slice(0, text.length - hold)
  }

  /** The end of generation: whatever was held back is plain text after all. */
  flush(): string {
    const rest = this.stoppedAt ? '' : this.pending
    this.pending = ''
    return rest
  }
}
