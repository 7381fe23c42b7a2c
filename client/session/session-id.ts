import { randomBytes } from 'node:crypto'

/** Random bits in a hop session id: unguessable by anyone who has seen other ids (issue #17). */
export const SESSION_ID_BYTES = 16

/**
 * A fresh hop session id: 128 random bits, hex. Every (re)connect of a pipeline, every decoy and
 * every standby gets its own, so a hop that saw one id learns nothing of the next (ids built as
 * `${uuid}.${n}` let a hop pre-open the id the client would use on its replacement: issue #17).
 */
export function randomSessionId(): string {
  return randomBytes(SESSION_ID_BYTES).toString('hex')
}
