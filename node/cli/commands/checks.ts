/**
 * Checks the CLI runs on its inputs before doing any work, so a bad value fails at once with a
 * one-line, typed error instead of a stack trace from deep inside libp2p or the file reader.
 */
import { accessSync, constants, statSync } from 'node:fs'
import { multiaddr } from '@multiformats/multiaddr'
import { suggestMultiaddr } from '../../../client/index.js'
import { errorCode } from '../../../shards/index.js'
import { downloadHubModel } from '../../hub-download.js'
import { parseHubSource } from '../../hub-source.js'
import {
  AddressInUseError,
  BadListenAddressError,
  ContextLengthExceededError,
  ListenFailedError,
  ModelNotFoundError
} from '../errors.js'
import { progressLine } from './model-source.js'

/** The model (or tokenizer) file exists and is a readable file. */
export function checkReadableFile(path: string, what = '--model'): string {
  try {
    if (!statSync(path).isFile()) throw new ModelNotFoundError(`${what} ${path} is not a file`)
    accessSync(path, constants.R_OK)
  } catch (err) {
    if (err instanceof ModelNotFoundError) throw err
    const code = errorCode(err)
    throw new ModelNotFoundError(
      code === 'ENOENT' ? `${what} ${path}: no such file` : `${what} ${path}: cannot read it (${code ?? (err as Error).message})`
    )
  }
  return path
}

const HOST_PORT = /^(\[[0-9a-f:]+\]|[^/:\s]+):(\d{1,5})$/i

/** Each --listen value is a TCP multiaddr (`host:port` gets the multiaddr it meant). */
export function checkListenAddrs(addrs: readonly string[]): string[] {
  for (const addr of addrs) {
    const hp = HOST_PORT.exec(addr)
    if (hp) {
      const suggestion = suggestMultiaddr(hp[1], hp[2]).replace('/p2p/<peer id>', '')
      throw new BadListenAddressError(`--listen ${addr} is host:port; use a multiaddr, e.g. ${suggestion}`)
    }
    let ok = false
    try {
      ok = multiaddr(addr)
        .getComponents()
        .some((c) => c.name === 'tcp')
    } catch {}
    if (!ok) throw new BadListenAddressError(`--listen ${addr} is not a TCP multiaddr; expected e.g. /ip4/0.0.0.0/tcp/4001`)
  }
  return [...addrs]
}

/** A failure to listen, as a typed one-line error (libp2p throws a long stack for EADDRINUSE). */
export function listenError(addrs: readonly string[], err: unknown): Error {
  const text = collect(err)
  const where = addrs.join(', ')
  if (/EADDRINUSE|address already in use/i.test(text))
    return new AddressInUseError(`cannot listen on ${where}: address in use (another node on that port? pick another --listen)`)
  if (/EADDRNOTAVAIL|EACCES|permission|ENOTFOUND|no valid addresses|could not listen|listen/i.test(text))
    return new ListenFailedError(`cannot listen on ${where}: ${firstLine(err)}`)
  return err as Error
}

/** The CLI's rule, as the gateway's: a prompt that fills the context leaves no room to generate. */
export function checkContextLength(promptTokens: number, contextLength: number): void {
  if (promptTokens >= contextLength)
    throw new ContextLengthExceededError(
      `this model's maximum context length is ${contextLength} tokens; your prompt has ${promptTokens}`
    )
}

function firstLine(err: unknown): string {
  return (err instanceof Error ? err.message : String(err)).split('\n')[0].slice(0, 200)
}

function collect(err: unknown): string {
  const out: string[] = []
  let e: unknown = err
  for (let i = 0; i < 5 && e instanceof Error; i++, e = (e as { cause?: unknown }).cause) {
    out.push(`${e.name} ${e.message} ${errorCode(e) ?? ''}`)
    if (e instanceof AggregateError) for (const x of e.errors) if (x instanceof Error) out.push(`${x.name} ${x.message}`)
  }
  return out.join(' ')
}

/**
 * A `--model` argument as a local path (issue 33 item 6): a file that exists is used as it is;
 * `hf://org/repo/file.gguf` and `org/repo:QUANT` are downloaded from the Hub (HF_ENDPOINT,
 * HF_TOKEN) into `$LAYERSWARM_HOME/models/hf/…`, resumed if a part is there, checked against the
 * Hub's sha256, and reused on the next start. Throws the CLI's ModelNotFoundError or a Hub*Error.
 */
export async function resolveModelArgument(
  arg: string,
  what = '--model',
  o: { log?: (event: Record<string, unknown>) => void; stream?: NodeJS.WriteStream; signal?: AbortSignal } = {}
): Promise<string> {
  const source = existsAsFile(arg) ? undefined : parseHubSource(arg)
  if (source === undefined) return checkReadableFile(arg, what)
  const bar = progressLine(`${source.repo}${source.file ? `/${source.file}` : `:${source.quant}`}`, o.stream ?? process.stderr)
  try {
    const d = await downloadHubModel(source, { onProgress: bar.draw, log: o.log, signal: o.signal })
    o.log?.({
      event: 'hub-model',
      repo: d.repo,
      file: d.file,
      path: d.path,
      bytes: d.bytes,
      cached: d.cached,
      fetchedBytes: d.fetchedBytes,
      sha256: d.sha256
    })
    return d.path
  } finally {
    bar.done()
  }
}

function existsAsFile(path: string): boolean {
  try {
    checkReadableFile(path)
    return true
  } catch {
    return false
  }
}
