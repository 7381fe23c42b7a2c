/**
 * `layerswarm identity show|new`: the key a node (or, with --client, a client) keeps across
 * restarts (node/identity.ts). `show` prints the peer id and the file; `new` makes a key, and
 * replaces one only with --force (a new key is a new peer id: bootstrap addresses naming the old
 * one go stale, and peers' records of it no longer apply).
 */
import type { Command } from 'commander'
import { createIdentity, defaultIdentityPath, type Identity, readIdentity } from '../../identity.js'

interface IdentityCliOptions {
  identity?: string
  client?: boolean
  json?: boolean
  force?: boolean
}

function pathOf(opts: IdentityCliOptions): string {
  return opts.identity ?? defaultIdentityPath(opts.client ? 'client' : 'node')
}

function print(id: Identity, json: boolean | undefined): void {
  if (json) process.stdout.write(`${JSON.stringify({ peerId: id.peerId, path: id.path, created: id.created })}\n`)
  else process.stdout.write(`${id.peerId}  ${id.path}${id.created ? '  (new)' : ''}\n`)
}

export function registerIdentity(program: Command): void {
  const cmd = program
    .command('identity')
    .description(
      "A peer's key file, which keeps its peer id across restarts (default $LAYERSWARM_HOME/identity.key, else ~/.layerswarm/identity.key)."
    )
  const common = (c: Command): Command =>
    c
      .option(
        '--identity <file>',
        'the key file (default: identity.key, or client-identity.key with --client, in the home folder)'
      )
      .option('--client', "a client's key instead of a node's", false)
      .option('--json', 'print JSON: {peerId, path, created}', false)
  common(cmd.command('show').description('Print the peer id of a key file.')).action((opts: IdentityCliOptions) => {
    print(readIdentity(pathOf(opts)), opts.json)
  })
  common(cmd.command('new').description('Make a new key file (mode 0600; --force replaces an existing one).'))
    .option('--force', 'replace an existing key (the peer id changes)', false)
    .action(async (opts: IdentityCliOptions) => {
      print(await createIdentity(pathOf(opts), { overwrite: opts.force === true }), opts.json)
    })
}
