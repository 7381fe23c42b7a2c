/**
 * Private swarms on the command line (issue #38): `swarm-key new`, `invite`, and the options
 * `--swarm-key FILE`, `--allow-serve FILE`, `--allow-use FILE` (and `--invite TOKEN` on join and
 * generate) on every command that connects. The options set the process's network policy
 * (protocol/network-policy.ts) before the command runs, and the environment
 * (LAYERSWARM_SWARM_KEY, ...) so that processes a command starts (join's node, demo's nodes)
 * follow the same policy.
 */
import { chmodSync, existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { peerIdFromString } from '@libp2p/peer-id'
import { type Command, Option } from 'commander'
import { parseBootstrapList } from '../../../client/index.js'
import { newSwarmKeyText, parseAllowList, parseSwarmKey, type SwarmKey, setNetworkPolicy } from '../../../protocol/index.js'
import { computeModelId, errorCode, openModelFile } from '../../../shards/index.js'
import { InviteModelMismatchError } from '../../errors.js'
import { layerswarmHome } from '../../identity.js'
import { decodeInvite, encodeInvite, parseDuration } from '../../invite.js'
import { defaultModelPath } from '../../paths.js'
import { warn } from '../cli-exit.js'
import { BadOptionError, InviteIsSecretNotice, SwarmFileError } from '../errors.js'

/** Commands that connect to a swarm, as paths of command names. */
const CONNECTING: ReadonlyArray<readonly string[]> = [
  ['node', 'start'],
  ['join'],
  ['generate'],
  ['api'],
  ['swarm'],
  ['doctor'],
  ['demo']
]
/** Of those, the ones that take `--invite`. */
const INVITED = new Set(['join', 'generate'])

const SECRET_WARNING =
  'this invite carries the swarm key: whoever holds it can join the swarm, also after it expires; send it only to the member, over a private channel, and keep it out of logs and chats'

function findCommand(program: Command, path: readonly string[]): Command | undefined {
  let cmd: Command | undefined = program
  for (const name of path) cmd = cmd?.commands.find((c) => c.name() === name)
  return cmd
}

function readPrivateFile(path: string, what: string): string {
  let text: string
  try {
    text = readFileSync(path, 'utf8')
  } catch (err) {
    throw new SwarmFileError(`${what} ${path}: cannot read it (${errorCode(err) ?? (err as Error).message})`)
  }
  if (process.platform !== 'win32' && (statSync(path).mode & 0o077) !== 0 && what === '--swarm-key')
    warn(new SwarmFileError(`${what} ${path}: others may read the key (chmod 600 ${path})`))
  return text
}

function readAllowList(path: string, what: string): Set<string> {
  const ids = parseAllowList(readPrivateFile(path, what))
  for (const id of ids) {
    try {
      peerIdFromString(id)
    } catch {
      throw new SwarmFileError(`${what} ${path}: ${JSON.stringify(id.slice(0, 80))} is not a peer id`)
    }
  }
  return ids
}

/** Where a key that came in an invite is kept (0600), so the processes this one starts can read it. */
function storeInvitedKey(key: SwarmKey): string {
  const dir = join(layerswarmHome(), 'swarm-keys')
  mkdirSync(dir, { recursive: true, mode: 0o700 })
  const path = join(dir, `${key.fingerprint}.key`)
  writeFileSync(path, `${key.text}\n`, { mode: 0o600 })
  chmodSync(path, 0o600)
  return path
}

/**
 * One line per refused peer, not per attempt: a peer without the key redials (libp2p's reconnect
 * queue, a client's refresh loop), so repeats from one address within REPEAT_MS are counted and
 * told with the next line.
 */
const REPEAT_MS = 60_000
function refusalLines(): (err: Error & { code?: string }) => void {
  const last = new Map<string, { atMs: number; more: number }>()
  return (err) => {
    const from = /from \/ip[46]\/([^/]+)/.exec(err.message)?.[1] ?? err.message
    const seen = last.get(from)
    const now = Date.now()
    if (seen && now - seen.atMs < REPEAT_MS) {
      seen.more++
      return
    }
    if (seen?.more) err.message += ` (and ${seen.more} more from ${from} in the last minute)`
    last.set(from, { atMs: now, more: 0 })
    warn(err)
  }
}

/** The option values after the command line, environment and config file (config.ts) were applied. */
function applyPrivateSwarm(cmd: Command): void {
  const opts = cmd.opts() as {
    swarmKey?: string
    allowServe?: string
    allowUse?: string
    invite?: string
    bootstrap?: string
    model?: string
  }
  let keyPath = opts.swarmKey
  if (opts.invite !== undefined) {
    const invite = decodeInvite(opts.invite)
    if (opts.bootstrap === undefined) cmd.setOptionValueWithSource('bootstrap', invite.bootstrap.join(','), 'cli')
    const modelPath = opts.model ?? defaultModelPath()
    if (existsSync(modelPath)) {
      const model = openModelFile(modelPath)
      const id = computeModelId(model)
      model.close()
      if (id !== invite.modelId)
        throw new InviteModelMismatchError(
          `the invite is for model ${invite.modelId}, but ${modelPath} is ${id}: pass --model with that model's file`
        )
    }
    if (invite.swarmKey !== undefined && keyPath === undefined)
      keyPath = storeInvitedKey(parseSwarmKey(invite.swarmKey, 'the invite'))
  }
  const swarmKey =
    keyPath !== undefined ? parseSwarmKey(readPrivateFile(keyPath, '--swarm-key'), `--swarm-key ${keyPath}`) : undefined
  const allowServe = opts.allowServe !== undefined ? readAllowList(opts.allowServe, '--allow-serve') : undefined
  const allowUse = opts.allowUse !== undefined ? readAllowList(opts.allowUse, '--allow-use') : undefined
  // processes this command starts (join's node, demo's nodes) inherit the policy
  if (keyPath !== undefined) process.env.LAYERSWARM_SWARM_KEY = resolve(keyPath)
  if (opts.allowServe !== undefined) process.env.LAYERSWARM_ALLOW_SERVE = resolve(opts.allowServe)
  if (opts.allowUse !== undefined) process.env.LAYERSWARM_ALLOW_USE = resolve(opts.allowUse)
  setNetworkPolicy({
    ...(swarmKey ? { swarmKey } : {}),
    ...(allowServe ? { allowServe } : {}),
    ...(allowUse ? { allowUse } : {}),
    onRefused: refusalLines()
  })
}

/**
 * Add the private-swarm options to every connecting command. Called after withConfigEverywhere,
 * so the hook runs after the environment and config file filled the options.
 */
/**
 * Every bootstrap address refused us at the swarm-key check: this peer holds another key than
 * the swarm (or none), so `node start` and `join` stop instead of serving a swarm of one.
 */
export function refusedByEveryBootstrap<E extends Error & { code?: string }>(
  failed: readonly E[],
  bootstrapCount: number
): E | undefined {
  return bootstrapCount > 0 && failed.length === bootstrapCount && failed.every((e) => e.code === 'SWARM_KEY_MISMATCH')
    ? failed[0]
    : undefined
}

export function addPrivateSwarmOptions(program: Command): void {
  for (const path of CONNECTING) {
    const cmd = findCommand(program, path)
    if (!cmd) continue
    cmd
      .option(
        '--swarm-key <file>',
        'private swarm: the pre-shared key file (`layerswarm swarm-key new`); peers without it cannot connect'
      )
      .option(
        '--allow-serve <file>',
        'peer ids (one a line) that may serve blocks; with --allow-use, the only peers this one connects to'
      )
      .option(
        '--allow-use <file>',
        'peer ids (one a line) that may use this node; with --allow-serve, the only peers this one connects to'
      )
    if (INVITED.has(path[path.length - 1]))
      cmd.option(
        '--invite <token>',
        'join by invite (`layerswarm invite`): bootstrap addresses, model id and swarm key from the token; a secret when it carries a key'
      )
    cmd.hook('preAction', (self) => applyPrivateSwarm(self))
  }
}

export function registerPrivateSwarm(program: Command): void {
  const keys = program.command('swarm-key').description('Pre-shared keys of private swarms (libp2p pnet).')
  keys
    .command('new')
    .description('Make a new swarm key (32 random bytes, libp2p v1 format, mode 0600). Prints {path, fingerprint}.')
    .option('--out <file>', "where to write it ('-': stdout; default $LAYERSWARM_HOME/swarm.key)")
    .option('--force', 'replace an existing file', false)
    .action((opts: { out?: string; force: boolean }) => {
      const text = newSwarmKeyText()
      const key = parseSwarmKey(text)
      if (opts.out === '-') {
        process.stdout.write(text)
        return
      }
      const path = resolve(opts.out ?? join(layerswarmHome(), 'swarm.key'))
      if (existsSync(path) && !opts.force)
        throw new SwarmFileError(`${path} exists; pass --force to replace it (members holding the old key are shut out)`)
      mkdirSync(resolve(path, '..'), { recursive: true, mode: 0o700 })
      writeFileSync(path, text, { mode: 0o600 })
      chmodSync(path, 0o600)
      process.stdout.write(`${JSON.stringify({ path, fingerprint: key.fingerprint })}\n`)
    })

  program
    .command('invite')
    .description(
      'Print an invite token: bootstrap addresses, model id, optionally the swarm key, and an expiry. A token with a key is a secret.'
    )
    .requiredOption('--bootstrap <addrs>', 'comma-separated multiaddrs (with /p2p/<peer id>) of swarm peers the member dials')
    .option('--model <path>', 'the model the swarm serves (default: the bundled stories260K.gguf)')
    .option('--model-id <id>', 'the model id instead of a model file')
    .option('--swarm-key <file>', 'put this swarm key in the token (then the token is a secret)')
    .addOption(new Option('--expires <duration>', "how long the token is accepted: 90s, 30m, 24h, 7d or 'never'").default('24h'))
    .action((opts: { bootstrap: string; model?: string; modelId?: string; swarmKey?: string; expires: string }) => {
      const bootstrap = parseBootstrapList(opts.bootstrap)
      const ttlMs = parseDuration(opts.expires)
      if (Number.isNaN(ttlMs) || (ttlMs !== undefined && ttlMs <= 0))
        throw new BadOptionError(`--expires ${opts.expires}: expected e.g. 90s, 30m, 24h, 7d or never`)
      let modelId = opts.modelId
      if (modelId === undefined) {
        const model = openModelFile(opts.model ?? defaultModelPath())
        modelId = computeModelId(model)
        model.close()
      }
      const key =
        opts.swarmKey !== undefined
          ? parseSwarmKey(readPrivateFile(opts.swarmKey, '--swarm-key'), `--swarm-key ${opts.swarmKey}`)
          : undefined
      const token = encodeInvite({
        bootstrap,
        modelId,
        ...(key ? { swarmKey: key.text } : {}),
        ...(ttlMs !== undefined ? { expiresAtMs: Date.now() + ttlMs } : {})
      })
      if (key) warn(new InviteIsSecretNotice(SECRET_WARNING))
      process.stdout.write(`${token}\n`)
    })
}
