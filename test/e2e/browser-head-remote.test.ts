import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type BrowserContext, chromium } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { RunningApi } from '../../node/cli/commands/api.js'
import { type LocalNode, startLocalNode } from '../../node/cli/local-swarm.js'
import { startGatewayApi } from '../helpers/gateway-api.js'
import { GGUF_PATH, loadReference, ROOT } from '../helpers/reference.js'

// Issue #35 item 4, session 4: the browser chat with the head on a peer (`/chat#head=remote`).
// Two node processes serve blocks [1,3) and [3,5) of the bundled model over TCP and WebSockets;
// headless Chromium loads the gateway's page, whose worker runs the SDK with `head: 'remote'`:
// the peer of [3,5) runs the head and answers sealed top-k replies the tab opens and checks with
// the head rows it fetched (`#head-rows=64`: 2 runs of 32 of the 512 rows). The tokens equal the
// llama2.c reference and those of the same page with its head local.

const CHROMIUM = '/usr/bin/chromium'
const SKIP = !existsSync(CHROMIUM) && !process.env.CI
const BUNDLE = join(ROOT, 'dist', 'browser', 'layerswarm-worker.js')
const NODE_ARGS = ['--listen', '/ip4/127.0.0.1/tcp/0', '/ip4/127.0.0.1/tcp/0/ws', '--announce-interval', '300']
const ref = loadReference('stories260K_greedy_once_upon_a_time')
const MAX_TOKENS = 24

describe.skipIf(SKIP)(`browser chat with the head on a peer${SKIP ? ` (skipped: ${CHROMIUM} not found)` : ''}`, () => {
  const nodes: LocalNode[] = []
  let api: RunningApi
  let browser: BrowserContext
  let profile: string

  beforeAll(async () => {
    expect(existsSync(BUNDLE), `${BUNDLE} missing: npm run build:browser`).toBe(true)
    nodes.push(await startLocalNode({ model: GGUF_PATH, layers: '1:3', args: NODE_ARGS }))
    nodes.push(await startLocalNode({ model: GGUF_PATH, layers: '3:5', bootstrap: [nodes[0].addrs[0]], args: NODE_ARGS }))
    // the gateway's own client keeps the head local (edges 1 and 0: the swarm covers [1,5))
    api = await startGatewayApi({ bootstrap: nodes[0].addrs[0], model: GGUF_PATH, edgeLast: 0 })
    profile = mkdtempSync(join(tmpdir(), 'layerswarm-chromium-head-'))
    browser = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-sync']
    })
  }, 120_000)

  afterAll(async () => {
    await browser?.close()
    if (profile) rmSync(profile, { recursive: true, force: true })
    await api?.close()
    await Promise.all(nodes.map((n) => n.stop()))
  })

  /** Load /chat with `fragment`, generate greedily; the tokens and the page's two status lines. */
  async function chat(fragment: string): Promise<{ tokens: number[]; ready: string; done: string }> {
    const page = await browser.newPage()
    const errors: string[] = []
    page.on('pageerror', (e) => errors.push(e.message))
    try {
      await page.goto(`${api.gateway.url}/chat${fragment}`)
      await page.waitForSelector('#state[data-state="ready"], #state[data-state="error"]', { timeout: 90_000 })
      const ready = (await page.textContent('#meta')) ?? ''
      expect(await page.getAttribute('#state', 'data-state'), `${ready} ${errors.join('; ')}`).toBe('ready')
      await page.fill('#prompt', ref.prompt)
      await page.fill('#max-tokens', String(MAX_TOKENS))
      await page.click('#go')
      await page.waitForSelector('#state[data-state="done"], #state[data-state="error"]', { timeout: 150_000 })
      const done = (await page.textContent('#meta')) ?? ''
      expect(await page.getAttribute('#state', 'data-state'), done).toBe('done')
      expect(errors).toEqual([])
      const tokens = ((await page.getAttribute('#output', 'data-tokens')) ?? '').split(',').map(Number)
      return { tokens, ready, done }
    } finally {
      await page.close()
    }
  }

  it('#head=remote: the reference tokens, the head checked in the tab with 64 rows', {
    timeout: 360_000
  }, async () => {
    const remote = await chat('#head=remote&head-rows=64')
    expect(remote.tokens).toEqual(ref.generated_tokens.slice(0, MAX_TOKENS))
    const m = /head on a peer: (\d+) checks, (\d+) violations, (\d+) rows held/.exec(remote.done)
    expect(m, remote.done).not.toBeNull()
    expect(Number(m?.[1])).toBeGreaterThan(0)
    expect(Number(m?.[2])).toBe(0)
    // the secret rows (2 runs of 32) and the context rows inside them, not the 512-row head
    expect(Number(m?.[3])).toBeLessThanOrEqual(64)
    const local = await chat('')
    expect(local.tokens).toEqual(remote.tokens)
    expect(local.done).not.toContain('head on a peer')
    // what it downloads: test/client/browser-model-url.test.ts (this small file comes in the page's first request)
  })
})
