/**
 * The CLI's `--head` option (generate, api) and `node start --tamper-head` (issue #35), shared so
 * the words about what a head peer learns are said once.
 */
import { InvalidArgumentError, Option } from 'commander'
import { createHeadTamper, HEAD_TAMPER_MODES, type HeadTamperMode } from '../../canary/index.js'

export const HEAD_HELP =
  'where the final norm and LM head run: local (default; no peer sees the output) or remote: the peer serving the ' +
  "model's last block runs them and answers a sealed top-k, so the client downloads and computes less per token, " +
  'but THAT PEER LEARNS THE OUTPUT DISTRIBUTION, HENCE THE GENERATED TEXT (docs/security.md). With remote the client ' +
  'runs no blocks after the swarm (--edge-last is ignored) and checks the head peer with secret head rows'

export function headOption(): Option {
  return new Option('--head <where>', HEAD_HELP).choices(['local', 'remote']).default('local')
}

export function tamperHeadOption(): Option {
  // parsed into the transform the daemon takes (SwarmNodeInit.tamperHead)
  return new Option(
    '--tamper-head <mode>',
    `for measuring the head check: rewrite the sealed top-k (${HEAD_TAMPER_MODES.join(', ')})`
  )
    .argParser((mode) => {
      if (!(HEAD_TAMPER_MODES as readonly string[]).includes(mode))
        throw new InvalidArgumentError(`--tamper-head: one of ${HEAD_TAMPER_MODES.join(', ')}`)
      return createHeadTamper({ mode: mode as HeadTamperMode })
    })
    .hideHelp()
}

/** ClientInit fields for `--head`: the head's place, and no blocks after the swarm when remote. */
export function headInit(head: string | undefined, edgeLast: number): { head: 'local' | 'remote'; edgeLast: number } {
  return head === 'remote' ? { head: 'remote', edgeLast: 0 } : { head: 'local', edgeLast }
}
