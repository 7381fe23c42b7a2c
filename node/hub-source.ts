import type { AbortOptions } from '@libp2p/interface'
import { HubAuthError, HubDownloadError, HubNotFoundError, InvalidModelSourceError } from './errors.js'

/**
 * Models named on the Hugging Face Hub (issue 33 item 6), in the two shapes people type:
 * `hf://org/repo/path/file.gguf` (optionally `hf://org/repo@revision/file.gguf`, as
 * huggingface_hub's HfFileSystem writes it) and llama.cpp's `-hf` shape `org/repo:Q4_K_M` (the
 * repository's GGUF file of that quantisation, found in its file list). Anything else is a path.
 */
export interface HubSource {
  readonly repo: string
  readonly revision: string
  /** The file in the repository; absent for `org/repo:QUANT` until resolveHubFile picks it. */
  readonly file?: string
  readonly quant?: string
}

/** https://huggingface.co, or HF_ENDPOINT (a mirror, or the test's local Hub), without a trailing slash. */
export function hubEndpoint(env: NodeJS.ProcessEnv = process.env): string {
  const e = env.HF_ENDPOINT?.trim()
  return (e !== undefined && e !== '' ? e : 'https://huggingface.co').replace(/\/+$/, '')
}

/** HF_TOKEN as the Hub's `Authorization: Bearer` header (none when unset). */
export function hubHeaders(env: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const t = env.HF_TOKEN?.trim()
  return t ? { authorization: `Bearer ${t}` } : {}
}

const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]*$/
const QUANT = /^[A-Za-z0-9_]+$/

/** The Hub source `text` names, or undefined for a local path (a file that exists always wins over `org/repo:Q`). */
export function parseHubSource(text: string): HubSource | undefined {
  if (text.startsWith('hf://')) {
    const parts = text.slice('hf://'.length).split('/')
    if (parts.length < 3 || parts.some((p) => p === '' || p === '.' || p === '..'))
      throw new InvalidModelSourceError(`${text}: expected hf://org/repo/file.gguf (or hf://org/repo@revision/file.gguf)`)
    const [org, repoRev, ...file] = parts
    const [repo, revision = 'main', extra] = repoRev.split('@')
    if (extra !== undefined || !NAME.test(org) || !NAME.test(repo) || !/^[A-Za-z0-9._/-]+$/.test(revision))
      throw new InvalidModelSourceError(`${text}: the repository must be org/repo, optionally with @revision`)
    return { repo: `${org}/${repo}`, revision, file: file.join('/') }
  }
  const m = /^([A-Za-z0-9][A-Za-z0-9._-]*)\/([A-Za-z0-9][A-Za-z0-9._-]*)(?:@([A-Za-z0-9._-]+))?:([^/:]+)$/.exec(text)
  if (!m) return undefined
  if (!QUANT.test(m[4])) throw new InvalidModelSourceError(`${text}: the quantisation after ':' is a name like Q4_K_M`)
  return { repo: `${m[1]}/${m[2]}`, revision: m[3] ?? 'main', quant: m[4] }
}

/** The resolve URL of a file (the Hub answers it with the file, or a 302 to its CDN for LFS files). */
export function resolveUrl(endpoint: string, s: HubSource & { file: string }): string {
  const path = s.file.split('/').map(encodeURIComponent).join('/')
  return `${endpoint}/${s.repo}/resolve/${encodeURIComponent(s.revision)}/${path}`
}

/** 401/403/404 from the Hub as our typed errors; the Hub's X-Error-Code / X-Error-Message say which. */
export function hubStatusError(res: Response, what: string): Error {
  const code = res.headers.get('x-error-code') ?? ''
  const said = res.headers.get('x-error-message') ?? ''
  const detail = `${code}${said ? `: ${said}` : ''}`.trim()
  if (res.status === 401 || res.status === 403) {
    const gated = code === 'GatedRepo' || /gated|restricted/i.test(said)
    const hint = process.env.HF_TOKEN
      ? 'the HF_TOKEN given has no access to it (accept its terms on the Hub, or use a token of an account that did)'
      : 'set HF_TOKEN to a Hugging Face access token of an account that may read it'
    return new HubAuthError(
      `${what}: HTTP ${res.status}${detail ? ` (${detail})` : ''}: ${gated ? 'a gated repository' : 'private or gated'}; ${hint}`
    )
  }
  if (res.status === 404)
    return new HubNotFoundError(`${what}: HTTP 404${detail ? ` (${detail})` : ''}: no such repository, revision or file`)
  return new HubDownloadError(`${what}: HTTP ${res.status}${detail ? ` (${detail})` : ''}`)
}

interface TreeEntry {
  readonly type?: string
  readonly path?: string
  readonly size?: number
  readonly lfs?: { readonly oid?: string; readonly size?: number }
}

/**
 * `org/repo:QUANT` → the repository's GGUF file of that quantisation, from the Hub's file list
 * (`GET /api/models/{repo}/tree/{revision}?recursive=true`). The quantisation is matched as a
 * whole word of the file name, case-blind (`Q4_K_M` matches `model-q4_k_m.gguf`, not
 * `model-Q4_K_M_L.gguf`); a split GGUF (`-00001-of-00003`) is refused, as one file is what a span opens.
 */
export async function resolveHubFile(
  s: HubSource,
  endpoint: string,
  headers: Record<string, string>,
  { signal }: AbortOptions = {}
): Promise<HubSource & { file: string }> {
  if (s.file !== undefined) return { ...s, file: s.file }
  const url = `${endpoint}/api/models/${s.repo}/tree/${encodeURIComponent(s.revision)}?recursive=true`
  let res: Response
  try {
    res = await fetch(url, { headers: { ...headers, accept: 'application/json' }, signal })
  } catch (err) {
    throw new HubDownloadError(`listing ${s.repo}: ${(err as Error).message}`)
  }
  if (!res.ok) throw hubStatusError(res, `listing ${s.repo}@${s.revision}`)
  const entries = (await res.json()) as TreeEntry[]
  const ggufs = (Array.isArray(entries) ? entries : [])
    .filter((e) => e.type === 'file' && typeof e.path === 'string' && e.path.toLowerCase().endsWith('.gguf'))
    .map((e) => e.path as string)
  const q = (s.quant ?? '').toLowerCase()
  const word = new RegExp(`(^|[^a-z0-9])${q}([^a-z0-9_]|$)`)
  const matches = ggufs.filter((p) => word.test((p.split('/').pop() ?? p).toLowerCase().replace(/\.gguf$/, '')))
  const whole = matches.filter((p) => !/-\d{5}-of-\d{5}\.gguf$/i.test(p))
  if (whole.length === 0) {
    const split = matches.length > 0 ? ' (only as a split GGUF, which is not supported: merge it with llama-gguf-split)' : ''
    throw new HubNotFoundError(
      `${s.repo}: no GGUF file of ${s.quant}${split}; its GGUF files: ${ggufs.slice(0, 20).join(', ') || 'none'}`
    )
  }
  // the shortest path: the top-level file over one in a sub-folder of variants
  whole.sort((a, b) => a.split('/').length - b.split('/').length || a.length - b.length || a.localeCompare(b))
  return { ...s, file: whole[0] }
}
