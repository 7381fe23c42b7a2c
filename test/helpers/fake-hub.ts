import { createHash } from 'node:crypto'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'

/**
 * A local HTTP server that answers as the Hugging Face Hub does (issue 33 item 6; this VM has no
 * internet): `GET /api/models/{repo}/tree/{rev}` lists files with their LFS sha256; a resolve URL
 * answers HEAD and GET with a 302 to a CDN path carrying X-Linked-Etag (the sha256) and
 * X-Linked-Size; the CDN path serves Range requests with 206; a gated repository answers 401
 * without the right bearer token. Knobs make it drop a connection mid-file or serve a flipped byte.
 */
export interface FakeHubFile {
  readonly path: string
  readonly bytes: Uint8Array
  /** Serve these bytes instead (a corrupted CDN object) while announcing the sha256 of `bytes`. */
  readonly served?: Uint8Array
}

export interface FakeHubRepo {
  readonly files: readonly FakeHubFile[]
  /** Bearer token this gated repository needs. */
  readonly token?: string
}

export interface FakeHub {
  readonly url: string
  /** Every request: method, url, range header. */
  readonly requests: Array<{ method: string; url: string; range?: string; auth?: string }>
  /** The next this many CDN GETs send half of what they should, then drop the connection. */
  dropNext: number
  close(): Promise<void>
}

const sha256 = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex')

export async function startFakeHub(repos: Record<string, FakeHubRepo>): Promise<FakeHub> {
  const cdn = new Map<string, Uint8Array>()
  // CDN objects named by repository and file (two repos may hold the same bytes, one of them corrupted)
  for (const [name, r] of Object.entries(repos)) for (const f of r.files) cdn.set(`${name}/${f.path}`, f.served ?? f.bytes)
  const hub: FakeHub = { url: '', requests: [], dropNext: 0, close: async () => {} }
  const deny = (res: ServerResponse, status: number, code: string, message: string): void => {
    res.writeHead(status, { 'x-error-code': code, 'x-error-message': message, 'content-type': 'application/json' })
    res.end(JSON.stringify({ error: message }))
  }
  const handler = (req: IncomingMessage, res: ServerResponse): void => {
    const url = new URL(req.url ?? '/', 'http://hub')
    hub.requests.push({
      method: req.method ?? '',
      url: url.pathname + url.search,
      range: req.headers.range,
      auth: req.headers.authorization
    })
    const allowed = (r: FakeHubRepo): boolean => r.token === undefined || req.headers.authorization === `Bearer ${r.token}`
    const tree = /^\/api\/models\/([^/]+\/[^/]+)\/tree\/([^/]+)$/.exec(url.pathname)
    if (tree) {
      const repo = repos[tree[1]]
      if (!repo) return void deny(res, 401, 'RepositoryNotFound', 'Repository not found')
      if (!allowed(repo)) return void deny(res, 401, 'GatedRepo', 'Access to this model is restricted')
      const list = repo.files.map((f) => ({
        type: 'file',
        path: f.path,
        size: f.bytes.byteLength,
        oid: 'x',
        lfs: { oid: sha256(f.bytes), size: f.bytes.byteLength, pointerSize: 134 }
      }))
      res.writeHead(200, { 'content-type': 'application/json' })
      return void res.end(JSON.stringify(list))
    }
    const resolve = /^\/([^/]+\/[^/]+)\/resolve\/([^/]+)\/(.+)$/.exec(url.pathname)
    if (resolve) {
      const repo = repos[resolve[1]]
      if (!repo) return void deny(res, 401, 'RepositoryNotFound', 'Repository not found')
      if (!allowed(repo)) return void deny(res, 401, 'GatedRepo', 'Access to this model is restricted')
      const file = repo.files.find((f) => f.path === decodeURIComponent(resolve[3]))
      if (!file) return void deny(res, 404, 'EntryNotFound', 'Entry not found')
      const sum = sha256(file.bytes)
      res.writeHead(302, {
        location: `/cdn/${sum}?object=${encodeURIComponent(`${resolve[1]}/${file.path}`)}`,
        'x-linked-etag': `"${sum}"`,
        'x-linked-size': String(file.bytes.byteLength),
        'x-repo-commit': '0123456789abcdef0123456789abcdef01234567',
        etag: '"1234567890abcdef1234567890abcdef12345678"'
      })
      return void res.end()
    }
    const body = url.pathname.startsWith('/cdn/') ? cdn.get(url.searchParams.get('object') ?? '') : undefined
    if (!body) return void deny(res, 404, 'EntryNotFound', 'no such object')
    const m = /^bytes=(\d+)-$/.exec(req.headers.range ?? '')
    const from = m ? Number(m[1]) : 0
    if (from >= body.byteLength && m) {
      res.writeHead(416, { 'content-range': `bytes */${body.byteLength}` })
      return void res.end()
    }
    const part = body.subarray(from)
    res.writeHead(m ? 206 : 200, {
      'content-length': String(part.byteLength),
      'accept-ranges': 'bytes',
      ...(m ? { 'content-range': `bytes ${from}-${body.byteLength - 1}/${body.byteLength}` } : {})
    })
    if (req.method === 'HEAD') return void res.end()
    if (hub.dropNext > 0) {
      hub.dropNext--
      // half the bytes, then the connection dies as a flaky link's would
      res.write(part.subarray(0, Math.floor(part.byteLength / 2)), () => setTimeout(() => res.socket?.destroy(), 20))
      return
    }
    res.end(part)
  }
  const server: Server = createServer(handler)
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  const port = (server.address() as AddressInfo).port
  Object.assign(hub, {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections()
        server.close(() => r())
      })
  })
  return hub
}
