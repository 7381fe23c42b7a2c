import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type BrowserContext, chromium } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { RunningApi } from '../../node/cli/commands/api.js'
import { type LocalNode, startLocalNode } from '../../node/cli/local-swarm.js'
import { startGatewayApi } from '../helpers/gateway-api.js'
import { GGUF_PATH, ROOT } from '../helpers/reference.js'

const CHROMIUM = '/usr/bin/chromium'
// In CI (.ci/run installs Debian's chromium) a missing browser is a failure; elsewhere the test says why it skips.
const SKIP = !existsSync(CHROMIUM) && !process.env.CI
const FAST = ['--kernels', 'reference', '--announce-interval', '300']
const SHOT = join(ROOT, 'test-output', 'status-page.png')
/** The README's picture; refreshed only on request, so test runs leave tracked files alone. */
const README_SHOT = join(ROOT, 'node', 'gateway', 'static', 'screenshot.png')

describe.skipIf(SKIP)(
  `status page in headless Chromium${SKIP ? ` (skipped: ${CHROMIUM} not found; apt-get install chromium)` : ''}`,
  () => {
    const nodes: LocalNode[] = []
    let api: RunningApi
    let browser: BrowserContext
    let profile: string

    beforeAll(async () => {
      nodes.push(await startLocalNode({ model: GGUF_PATH, layers: '0:3', args: FAST }))
      nodes.push(await startLocalNode({ model: GGUF_PATH, layers: '2:5', bootstrap: [nodes[0].addrs[0]], args: FAST }))
      api = await startGatewayApi({ bootstrap: nodes[0].addrs[0], model: GGUF_PATH, maxConcurrent: 4, canaryRate: 0.5 })
      // Some traffic, so the page has routes, canary verdicts and tokens to show.
      for (const prompt of ['Once upon a time', 'Lily had a red ball']) {
        const res = await fetch(`${api.gateway.url}/v1/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'stories260K', prompt, max_tokens: 40, temperature: 0 })
        })
        expect(res.status).toBe(200)
      }
      profile = mkdtempSync(join(tmpdir(), 'layerswarm-chromium-'))
      browser = await chromium.launchPersistentContext(profile, {
        executablePath: CHROMIUM,
        headless: true,
        args: [
          '--headless',
          '--no-sandbox',
          '--disable-gpu',
          '--disable-quic',
          '--no-first-run',
          '--disable-background-networking',
          '--disable-component-update',
          '--disable-sync'
        ],
        viewport: { width: 1440, height: 960 }
      })
    }, 120_000)

    afterAll(async () => {
      await browser?.close()
      if (profile) rmSync(profile, { recursive: true, force: true })
      await api?.close()
      await Promise.all(nodes.map((n) => n.stop()))
    })

    it('shows the real swarm: both peers, their spans, coverage, trust and traffic', async () => {
      const page = await browser.newPage()
      const errors: string[] = []
      page.on('pageerror', (e) => errors.push(e.message))
      await page.goto(`${api.gateway.url}/`)
      await page.waitForSelector('body[data-ready="true"]')
      for (const n of nodes) {
        await page.waitForSelector(`.map [data-peer-id="${n.peerId}"] .bar[data-span="${n.layers[0]}:${n.layers[1]}"]`, {
          timeout: 15_000
        })
        await expect(page.locator(`tbody#peers tr[data-peer-id="${n.peerId}"]`).count()).resolves.toBe(1)
      }
      expect(await page.locator('#kpi-peers').textContent()).toBe('2')
      expect(await page.locator('#kpi-coverage').textContent()).toBe('3/3')
      expect(await page.locator('.map .cell.gap').count()).toBe(0)
      expect(await page.locator('.map [data-edge] .bar.edge').count()).toBe(2)
      expect(await page.locator('#model-name').textContent()).toBe('stories260K')
      // Canaries ran during the two generations: at least one peer carries a verdict.
      await expect.poll(() => page.locator('tbody#peers .pill.ok').count(), { timeout: 10_000 }).toBeGreaterThan(0)
      expect(await page.locator('#recent li').count()).toBe(2)
      expect(errors).toEqual([])
      expect(await page.locator('#keyform').isVisible()).toBe(false)
      // Two polls draw the tokens/s sparkline.
      await page.waitForSelector('#spark-line[d]', { state: 'attached' })
      mkdirSync(join(ROOT, 'test-output'), { recursive: true })
      await page.screenshot({ path: SHOT, fullPage: true })
      if (process.env.UPDATE_SCREENSHOT) await page.screenshot({ path: README_SHOT, fullPage: true })
      expect(existsSync(SHOT)).toBe(true)
      await page.close()
    })

    it('with no generations yet, the example curl spans the panel (not one word a line, issue 31)', async () => {
      const page = await browser.newPage()
      await page.route('**/status.json', async (route) => {
        const res = await route.fetch()
        await route.fulfill({ response: res, json: { ...(await res.json()), recent: [] } })
      })
      await page.goto(`${api.gateway.url}/`)
      const code = page.locator('#recent li.empty code')
      await code.waitFor()
      const li = await page.locator('#recent li.empty').boundingBox()
      const box = await code.boundingBox()
      // a string: the test tsconfig has no DOM types
      const lineHeightPx = Number(
        await page.evaluate("parseFloat(getComputedStyle(document.querySelector('#recent li.empty code')).lineHeight) || 17")
      )
      expect(li && box).toBeTruthy()
      // as wide as the row (less its padding), and a couple of lines at 1440 px, not a column of words
      expect(box!.width).toBeGreaterThan(li!.width * 0.8)
      expect(box!.height).toBeLessThan(lineHeightPx * 4)
      await page.close()
    })

    it('highlights a coverage gap when a span loses its peer', async () => {
      const page = await browser.newPage()
      // The real status with the peer of [2, 5) gone: blocks 3 of the remote span [1, 4) is uncovered.
      const gone = nodes[1].peerId
      await page.route('**/status.json', async (route) => {
        const res = await route.fetch()
        const s = await res.json()
        s.peers = s.peers.filter((p: { peer_id: string }) => p.peer_id !== gone)
        s.coverage.peers_per_block = s.coverage.peers_per_block.map(
          (_: number, b: number) => s.peers.filter((p: { start: number; end: number }) => p.start <= b && b < p.end).length
        )
        s.coverage.gaps = [[3, 4]]
        await route.fulfill({ response: res, json: s })
      })
      await page.goto(`${api.gateway.url}/`)
      await page.waitForSelector('.map .cell.gap')
      expect(await page.locator('.map .cell.gap').count()).toBe(1)
      expect(await page.locator('#kpi-coverage').textContent()).toBe('2/3')
      expect(await page.locator('#kpi-coverage-sub').textContent()).toContain('gaps: 3')
      await page.close()
    })
  }
)
