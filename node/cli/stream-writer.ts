import type { StreamEvent } from '../../client/index.js'

/** When the CLI streams tokens as they come: on a terminal (auto), always, or never (only the final, honest text). */
export type StreamWhen = 'auto' | 'always' | 'never'
export const STREAM_CHOICES: readonly StreamWhen[] = ['auto', 'always', 'never']

/**
 * The CLI's output of a swarm generation. Streamed, tokens go out as they come, and a rollback
 * (a peer that computed shown tokens was convicted; client/session/verified-stream.ts) prints a notice and
 * the honest text again from the prompt on. Not streamed (a pipe, by default), nothing is printed
 * until the generation is final, so what a script reads is only honest text.
 */
export class StreamWriter {
  private completion = ''
  private echoed = false

  constructor(
    private readonly write: (text: string) => void,
    private readonly streamed: boolean,
    private readonly prompt: string
  ) {}

  /** Streamed, the prompt goes out with the first token (once a route exists), never before. */
  private echo(): void {
    if (!this.echoed && this.streamed) this.write(this.prompt)
    this.echoed = true
  }

  static create(write: (text: string) => void, when: StreamWhen, prompt: string, terminal: boolean): StreamWriter {
    return new StreamWriter(write, when === 'always' || (when === 'auto' && terminal), prompt)
  }

  event(ev: StreamEvent): void {
    this.echo()
    if (ev.type === 'token') {
      this.completion += ev.text
      if (this.streamed) this.write(ev.text)
      return
    }
    this.completion = this.completion.slice(0, ev.textOffset) + ev.text
    if (!this.streamed) return
    this.write(
      `\n[layerswarm: rollback from token ${ev.position}: it came through convicted peer(s) ${ev.convicted.join(', ')}; the honest text:]\n`
    )
    this.write(this.prompt + this.completion)
  }

  /** The generation is final: not streamed, its text goes out now. */
  end(completion: string): void {
    this.echo()
    if (!this.streamed) this.write(this.prompt + (this.completion || completion))
  }
}
