import { spawn } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type BrowserContext, chromium } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { RunningApi } from '../../node/cli/commands/api.js'
import { type LocalNode, startLocalNode } from '../../node/cli/local-swarm.js'
import { CLI } from '../helpers/cli.js'
import { startGatewayApi } from '../helpers/gateway-api.js'
import { GGUF_PATH, loadReference, ROOT } from '../helpers/reference.js'

const CHROMIUM = '/usr/bin/chromium'
// In CI (.ci/run installs Debian's chromium) a missing browser is a failure; elsewhere the test says why it skips.
const SKIP = !existsSync(CHROMIUM) && !process.env.CI
const BUNDLE = join(ROOT, 'dist', 'browser', 'layerswarm-worker.js')
// Nodes listen on TCP (each other, the gateway, the CLI) and on WebSockets (the browser).
const NODE_ARGS = ['--listen', '/ip4/127.0.0.1/tcp/0', '/ip4/127.0.0.1/tcp/0/ws', '--announce-interval', '300']
const ref = loadReference('stories260K_greedy_once_upon_a_time')
const MAX_TOKENS = 24

function cli(args: string[], timeoutMs = 90_000): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, ...args], { cwd: ROOT })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d) => (stdout += d))
    child.stderr.on('data', (d) => (stderr += d))
    const t = setTimeout(() => child.kill('SIGKILL'), timeoutMs)
    child.on('exit', (status) => {
      clearTimeout(t)
      resolve({ status, stdout, stderr })
    })
  })
}

describe.skipIf(SKIP)(
  `browser chat page in headless Chromium${SKIP ? ` (skipped: ${CHROMIUM} not found; apt-get install chromium)` : ''}`,
  () => {
    const nodes: LocalNode[] = []
    let api: RunningApi
    let browser: BrowserContext
    let profile: string
    let bankApi: RunningApi | undefined

    beforeAll(async () => {
      expect(existsSync(BUNDLE), `${BUNDLE} missing: npm run build:browser`).toBe(true)
      nodes.push(await startLocalNode({ model: GGUF_PATH, layers: '1:3', args: NODE_ARGS }))
      nodes.push(await startLocalNode({ model: GGUF_PATH, layers: '3:4', bootstrap: [nodes[0].addrs[0]], args: NODE_ARGS }))
      for (const n of nodes) expect(n.addrs.some((a) => a.includes('/ws/p2p/'))).toBe(true)
      api = await startGatewayApi({ bootstrap: nodes[0].addrs[0], model: GGUF_PATH })
      profile = mkdtempSync(join(tmpdir(), 'layerswarm-chromium-'))
      browser = await chromium.launchPersistentContext(profile, {
        executablePath: CHROMIUM,
        headless: true,
        args: [
          '--headless',
          '--no-sandbox',
          '--disable-gpu',
          '--no-first-run',
          '--disable-background-networking',
          '--disable-sync'
        ]
      })
    }, 120_000)

    afterAll(async () => {
      await bankApi?.close()
      await browser?.close()
      if (profile) rmSync(profile, { recursive: true, force: true })
      await api?.close()
      await Promise.all(nodes.map((n) => n.stop()))
    })

    it('serves the GGUF with byte ranges (206, Content-Range) and refuses unsatisfiable ones (416)', async () => {
      const part = await fetch(`${api.gateway.url}/model.gguf`, { headers: { range: 'bytes=0-3' } })
      expect(part.status).toBe(206)
      expect(part.headers.get('content-range')).toMatch(/^bytes 0-3\/\d+$/)
      expect(new TextDecoder().decode(await part.arrayBuffer())).toBe('GGUF')
      const bad = await fetch(`${api.gateway.url}/model.gguf`, { headers: { range: 'bytes=999999999-' } })
      expect(bad.status).toBe(416)
      const info = (await (await fetch(`${api.gateway.url}/browser.json`)).json()) as {
        bootstrap: string[]
        canaryBank: string | null
      }
      expect(info.canaryBank).toBeNull()
      expect(info.bootstrap.length).toBeGreaterThan(0)
      for (const a of info.bootstrap) expect(a).toMatch(/\/ws\/p2p\//)
      // no bank on this gateway: a typed 404, and the page is told
      const noBank = await fetch(`${api.gateway.url}/canary-bank`)
      expect(noBank.status).toBe(404)
      expect(((await noBank.json()) as { error: { code: string } }).error.code).toBe('no_bank')
    })

    it('generates through the 2-node swarm over WebSockets with the same greedy tokens as the CLI', {
      timeout: 240_000
    }, async () => {
      const page = await browser.newPage()
      const errors: string[] = []
      page.on('pageerror', (e) => errors.push(e.message))
      await page.setViewportSize({ width: 1100, height: 700 })
      await page.goto(`${api.gateway.url}/chat`)
      expect(await page.evaluate(() => (globalThis as unknown as { crossOriginIsolated: boolean }).crossOriginIsolated)).toBe(
        true
      )
      await page.waitForSelector('#state[data-state="ready"], #state[data-state="error"]', { timeout: 90_000 })
      const meta = await page.textContent('#meta')
      expect(await page.getAttribute('#state', 'data-state'), `${meta} ${errors.join('; ')}`).toBe('ready')
      expect(meta).toMatch(/wasm kernels/)
      await page.fill('#prompt', ref.prompt)
      await page.fill('#max-tokens', String(MAX_TOKENS))
      await page.click('#go')
      await page.waitForSelector('#state[data-state="done"], #state[data-state="error"]', { timeout: 150_000 })
      expect(await page.getAttribute('#state', 'data-state'), `${await page.textContent('#meta')}`).toBe('done')
      const tokens = ((await page.getAttribute('#output', 'data-tokens')) ?? '').split(',').map(Number)
      // the route went through both peers (blocks 1..4), not through the gateway
      const route = await page.textContent('#meta')
      for (const n of nodes) expect(route).toContain(n.peerId.slice(-6))

      const r = await cli([
        'generate',
        '--bootstrap',
        nodes[0].addrs[0],
        '--prompt',
        ref.prompt,
        '--max-tokens',
        String(MAX_TOKENS),
        '--temperature',
        '0',
        '--json'
      ])
      expect(r.status, r.stderr).toBe(0)
      const out = JSON.parse(r.stdout) as { tokens: number[] }
      expect(tokens).toEqual(out.tokens)
      expect(tokens).toEqual(ref.generated_tokens.slice(0, MAX_TOKENS))
      expect(errors).toEqual([])
      // Chromium's WebCrypto (AES-GCM, X25519) and the bundle's node:crypto shim pass the same
      // known-answer vectors as node:crypto does in test/crypto/async-primitives.test.ts
      const vectors = JSON.parse(readFileSync(join(ROOT, 'test', 'vectors', 'crypto-kat.json'), 'utf8'))
      const kat = await page.evaluate(
        (v) =>
          new Promise((resolve) => {
            type Port = {
              addEventListener(t: 'message', f: (e: { data: { type: string; failed: unknown } }) => void): void
              postMessage(m: unknown): void
            }
            const w = (globalThis as unknown as { layerswarmWorker: Port }).layerswarmWorker
            w.addEventListener('message', (e) => e.data.type === 'kat' && resolve(e.data.failed))
            w.postMessage({ type: 'kat', vectors: v })
          }),
        vectors
      )
      expect(kat).toEqual({ webcrypto: [], shim: [] })
      // for people (docs/browser.md): what the page shows; test-output/ is not tracked
      await page.screenshot({ path: join(ROOT, 'test-output', 'chat-page.png') })
      await page.close()
    })

    it('verifies with a canary bank in the tab: canaries are sent, no peer is excluded, same tokens', {
      timeout: 240_000
    }, async () => {
      const dir = mkdtempSync(join(tmpdir(), 'layerswarm-bank-'))
      const bank = join(dir, 'bank')
      const built = await cli(['canary', 'build', '--model', GGUF_PATH, '--out', bank, '--count', '4'])
      expect(built.status, built.stderr).toBe(0)
      const key = readFileSync(join(dir, 'canary-bank-key'), 'utf8').trim()
      bankApi = await startGatewayApi({ bootstrap: nodes[0].addrs[0], model: GGUF_PATH, canaryRate: 0.5, canaryBank: bank })
      // the bank is served sealed; a wrong key would not open it
      const sealed = new Uint8Array(await (await fetch(`${bankApi.gateway.url}/canary-bank`)).arrayBuffer())
      expect(new TextDecoder().decode(sealed.subarray(0, 8))).toBe('LSBANK01')
      const page = await browser.newPage()
      await page.goto(`${bankApi.gateway.url}/chat#bank-key=${key}`)
      await page.waitForSelector('#state[data-state="ready"], #state[data-state="error"]', { timeout: 90_000 })
      expect(await page.getAttribute('#state', 'data-state'), `${await page.textContent('#meta')}`).toBe('ready')
      await page.fill('#prompt', ref.prompt)
      await page.fill('#max-tokens', String(MAX_TOKENS))
      await page.click('#go')
      await page.waitForSelector('#state[data-state="done"], #state[data-state="error"]', { timeout: 180_000 })
      const meta = (await page.textContent('#meta')) ?? ''
      expect(await page.getAttribute('#state', 'data-state'), meta).toBe('done')
      const tokens = ((await page.getAttribute('#output', 'data-tokens')) ?? '').split(',').map(Number)
      expect(tokens).toEqual(ref.generated_tokens.slice(0, MAX_TOKENS))
      const sent = Number(/canaries sent: (\d+)/.exec(meta)?.[1] ?? 0)
      expect(sent, meta).toBeGreaterThan(0)
      expect(meta).toContain('peers excluded: 0')
      await page.close()
      rmSync(dir, { recursive: true, force: true })
    })

    it('a gateway with --api-key: the page says it needs the key, and works with #api-key', { timeout: 120_000 }, async () => {
      const key = 'browser-test-key-123'
      const keyed = await startGatewayApi({ bootstrap: nodes[0].addrs[0], model: GGUF_PATH, apiKey: key, maxConcurrent: 1 })
      try {
        expect((await fetch(`${keyed.gateway.url}/model.gguf`, { headers: { range: 'bytes=0-3' } })).status).toBe(401)
        const page = await browser.newPage()
        await page.goto(`${keyed.gateway.url}/chat`)
        await page.waitForSelector('#state[data-state="error"]', { timeout: 30_000 })
        expect(await page.textContent('#meta')).toContain('API_KEY')
        await page.goto(`${keyed.gateway.url}/chat#api-key=${key}`)
        await page.reload()
        await page.waitForSelector('#state[data-state="ready"], #state[data-state="error"]', { timeout: 90_000 })
        expect(await page.getAttribute('#state', 'data-state'), `${await page.textContent('#meta')}`).toBe('ready')
        await page.close()
      } finally {
        await keyed.close()
      }
    })
  }
)
