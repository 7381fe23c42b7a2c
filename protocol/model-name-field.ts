import { MalformedMessageError } from './errors.js'
import { stringField } from './field-checks.js'

/** Longest readable model name on the wire (issue 33 item 5; shards/model/model-name.ts makes them this short). */
export const MAX_MODEL_NAME_LENGTH = 120

/**
 * Announcement/InfoResponse.model_name: optional, at most MAX_MODEL_NAME_LENGTH characters, no
 * control characters (it is printed by `swarm` and served by the gateway, so a peer must not
 * be able to move a terminal's cursor or split a log line with it).
 */
export function modelNameField(value: unknown, field: string): { modelName?: string } {
  if (value == null || value === '') return {}
  const name = stringField(value, field, { max: MAX_MODEL_NAME_LENGTH })
  if (/\p{Cc}/u.test(name)) throw new MalformedMessageError(`${field}: control characters are not allowed`)
  return { modelName: name }
}
