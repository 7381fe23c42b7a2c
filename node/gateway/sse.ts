import type { FastifyReply } from 'fastify'

/**
 * A server-sent-events response as OpenAI streams it: `data: {json}\n\n` per chunk, then
 * `data: [DONE]\n\n`. Written to the raw socket, since fastify's reply is one payload.
 */
export class SseStream {
  private closed = false
  bytes = 0

  constructor(
    private readonly reply: FastifyReply,
    headers: Record<string, string>
  ) {
    reply.hijack()
    reply.raw.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache, no-transform',
      connection: 'keep-alive',
      // nginx and friends buffer responses unless told not to; tokens must arrive as they are made.
      'x-accel-buffering': 'no',
      ...headers
    })
    reply.raw.once('close', () => {
      this.closed = true
    })
  }

  get isClosed(): boolean {
    return this.closed || this.reply.raw.destroyed
  }

  send(data: unknown): void {
    this.write(`data: ${JSON.stringify(data)}\n\n`)
  }

  /**
   * A named event (`event: NAME`): OpenAI clients read only unnamed `data:` events, so layerswarm's
   * own events (docs/verification.md: `layerswarm` rollback events) pass them by.
   */
  event(name: string, data: unknown): void {
    this.write(`event: ${name}\ndata: ${JSON.stringify(data)}\n\n`)
  }

  /** `[DONE]` and the end of the response. */
  done(): void {
    this.write('data: [DONE]\n\n')
    this.end()
  }

  end(): void {
    if (this.isClosed) return
    this.closed = true
    this.reply.raw.end()
  }

  private write(text: string): void {
    if (this.isClosed) return
    this.bytes += Buffer.byteLength(text)
    this.reply.raw.write(text)
  }
}
