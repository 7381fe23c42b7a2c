import { InvalidArgumentError } from '../errors.js'
import type { StreamDecoder } from './tokenizer.js'

/**
 * Turns token bytes into text as they arrive. A TextDecoder in stream mode holds back a UTF-8
 * sequence split across byte tokens until it is complete, so per token this costs the token's
 * own bytes only.
 */
export function streamDecoder(
  tokenBytes: readonly Uint8Array[],
  checkId: (id: number, what: string) => void,
  adjust?: (id: number, prevId: number, bytes: Uint8Array) => Uint8Array
): StreamDecoder {
  // Non-fatal: stray bytes become U+FFFD where run.c would print them raw.
  const decoder = new TextDecoder('utf-8')
  return {
    push(id: number, prevId: number): string {
      checkId(id, 'token')
      if (prevId !== -1) checkId(prevId, 'previous token')
      const bytes = adjust ? adjust(id, prevId, tokenBytes[id]) : tokenBytes[id]
      return decoder.decode(bytes, { stream: true })
    },
    flush(): string {
      return decoder.decode()
    }
  }
}

export function idChecker(vocabSize: number): (id: number, what: string) => void {
  return (id, what) => {
    if (!Number.isInteger(id) || id < 0 || id >= vocabSize) {
      throw new InvalidArgumentError(`${what} ${id} is not a token id below ${vocabSize}`)
    }
  }
}
