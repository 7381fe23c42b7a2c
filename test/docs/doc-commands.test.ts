import { type ChildProcess, spawn } from 'node:child_process'
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { delimiter, join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { ROOT } from './cli-doc.js'
import { type DocCommand, docCommands } from './doc-commands.js'

// Issue 31 item 7: every shell command of README.md and docs/cli.md runs, on loopback, as the
// page shows it. Each command must match one rule below: run (with the remote addresses the page
// uses mapped to one local swarm this test starts), or skip with a reason. A command added to the
// pages without a rule fails the first test, naming its line. The commands run through `sh` with
// `layerswarm` on PATH (what `npm link` gives, as the README assumes), each with its own
// $LAYERSWARM_HOME so none shares a key file with another or with the user's.

const PAGES = ['README.md', 'docs/cli.md']
const BIN = join(ROOT, 'node_modules', '.bin')
const CURL = ['/usr/bin/curl', '/bin/curl', '/usr/local/bin/curl'].some((p) => existsSync(p))
const work = mkdtempSync(join(tmpdir(), 'layerswarm-doc-commands-'))
const running: ChildProcess[] = []

afterAll(async () => {
  await Promise.all(running.map((p) => stop(p)))
  rmSync(work, { recursive: true, force: true })
})

interface Result {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

let homes = 0
function env(): NodeJS.ProcessEnv {
  const home = join(work, `home-${homes++}`)
  return { ...process.env, PATH: `${BIN}${delimiter}${process.env.PATH ?? ''}`, LAYERSWARM_HOME: home, NO_COLOR: '1' }
}

function runShell(command: string, timeoutMs = 120_000): Promise<Result> {
  return new Promise((resolve) => {
    const child = spawn('sh', ['-c', command], { cwd: ROOT, env: env(), stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d) => {
      stdout += d
    })
    child.stderr.on('data', (d) => {
      stderr += d
    })
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs)
    child.on('close', (code) => {
      clearTimeout(timer)
      resolve({ code, stdout, stderr })
    })
  })
}

/** Start a long-running command; resolves with its first JSON line on stdout (what it prints once serving). */
function startShell(command: string, timeoutMs = 60_000): Promise<{ child: ChildProcess; first: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    // exec: signals reach the command itself, not only the shell
    const child = spawn('sh', ['-c', `exec ${command}`], { cwd: ROOT, env: env(), stdio: ['ignore', 'pipe', 'pipe'] })
    running.push(child)
    let stdout = ''
    let stderr = ''
    const timer = setTimeout(
      () => reject(new Error(`no JSON line within ${timeoutMs} ms from: ${command}\n${stderr}`)),
      timeoutMs
    )
    child.stderr?.on('data', (d) => {
      stderr += d
    })
    child.stdout?.on('data', (d) => {
      stdout += d
      const line = stdout.split('\n').find((l) => l.trim().startsWith('{'))
      if (line && stdout.includes('\n')) {
        clearTimeout(timer)
        resolve({ child, first: JSON.parse(line) })
      }
    })
    child.on('exit', (code) => {
      clearTimeout(timer)
      reject(new Error(`exited with ${code} before serving: ${command}\n${stderr}`))
    })
  })
}

function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve()
  return new Promise((resolve) => {
    const kill = setTimeout(() => child.kill('SIGKILL'), 15_000)
    child.once('exit', () => {
      clearTimeout(kill)
      resolve()
    })
    child.kill('SIGINT')
  })
}

/** The local stand-ins for the addresses the pages use. */
const local: { bootstrap?: string; apiUrl?: string } = {}

function localize(text: string): string {
  let out = text.replace(/\/ip4\/0\.0\.0\.0\/tcp\/\d+/g, '/ip4/127.0.0.1/tcp/0')
  if (local.bootstrap) out = out.replace(/\/ip4\/[\d.]+\/tcp\/\d+\/p2p\/12D3KooW…/g, local.bootstrap)
  if (local.apiUrl) out = out.replace(/http:\/\/127\.0\.0\.1:8080/g, local.apiUrl)
  // Loopback only: a page's example address left unmapped (the swarm failed to start) is never dialled.
  const foreign = /\/ip4\/(?!127\.)[\d.]+\/|…/.exec(out)
  if (foreign) throw new Error(`not run: ${JSON.stringify(foreign[0])} has no local stand-in in \`${out}\``)
  return out
}

/** A `# prints: {…}` line: its keys are there; values without a `…` placeholder equal (URLs are mapped). */
function checkPrints(doc: DocCommand, got: Record<string, unknown>): void {
  if (!doc.prints) return
  const want = JSON.parse(doc.prints) as Record<string, unknown>
  expect(Object.keys(got), `${doc.file}:${doc.line} prints`).toEqual(expect.arrayContaining(Object.keys(want)))
  for (const [k, v] of Object.entries(want)) {
    if (JSON.stringify(v).includes('…') || k === 'url') continue
    expect(got[k], `${doc.file}:${doc.line} prints ${k}`).toEqual(v)
  }
}

function expectOk(doc: DocCommand, r: Result): void {
  expect({ at: `${doc.file}:${doc.line}`, code: r.code, stderr: r.code === 0 ? '' : r.stderr.slice(-2000) }).toEqual({
    at: `${doc.file}:${doc.line}`,
    code: 0,
    stderr: ''
  })
}

const all = PAGES.flatMap(docCommands)
/** What the README says the first generate prints: every local and swarm generate of that prompt must print it. */
const story = all.find((c) => c.output !== undefined)?.output

interface Rule {
  readonly match: RegExp
  /** Lower runs first (the swarm before the commands that need it; join last, see its rule). */
  readonly order: number
  readonly skip?: string
  readonly run?: (doc: DocCommand) => Promise<void>
}

const RULES: Rule[] = [
  {
    match: /^npm install\b/,
    order: 0,
    skip: 'installs and rebuilds the clone: the test runs inside an installed one (.ci/run runs it first)'
  },
  { match: /^npm test\b/, order: 0, skip: 'the whole suite, of which this test is a part' },
  {
    // local generate: the README's story, however the command is spelled
    match: /^(?:layerswarm|\.\/node_modules\/\.bin\/layerswarm|npm run -s layerswarm --) generate (?!.*--bootstrap)/,
    order: 1,
    run: async (doc) => {
      const r = await runShell(localize(doc.text))
      expectOk(doc, r)
      expect(story, 'README.md shows what generate prints').toBeDefined()
      expect(r.stdout.trimEnd(), `${doc.file}:${doc.line}`).toBe(story)
    }
  },
  {
    match: /^npm run demo$/,
    order: 1,
    run: async (doc) => {
      const r = await runShell(doc.text, 180_000)
      expectOk(doc, r)
      const printed = r.stdout + r.stderr
      expect(printed).toContain(story?.split('\n')[0])
      for (const span of ['[1, 2)', '[2, 3)', '[3, 4)']) expect(printed).toContain(`blocks ${span} on 12D3KooW`)
    }
  },
  {
    // the swarm every later command uses: the README's node, on loopback
    match: /^layerswarm node start\b/,
    order: 2,
    run: async (doc) => {
      const { first } = await startShell(localize(doc.text))
      checkPrints(doc, first)
      local.bootstrap = (first.addrs as string[])[0]
      expect(local.bootstrap).toMatch(/^\/ip4\/127\.0\.0\.1\/tcp\/\d+\/p2p\/12D3KooW/)
    }
  },
  {
    match: /^layerswarm swarm\b/,
    order: 3,
    run: async (doc) => {
      const r = await runShell(localize(doc.text))
      expectOk(doc, r)
      expect(r.stdout).toMatch(/^model lsm1-/m)
      expect(r.stdout).toContain('[1, 4)')
    }
  },
  {
    // through the swarm: the same tokens as one process (README: "the generated tokens do not change")
    match: /^layerswarm generate\b.*--bootstrap/,
    order: 3,
    run: async (doc) => {
      const r = await runShell(localize(doc.text))
      expectOk(doc, r)
      expect(r.stdout.trimEnd()).toBe(story)
    }
  },
  {
    // the gateway on a free port (8080 may be taken), then its pages
    match: /^layerswarm api\b/,
    order: 4,
    run: async (doc) => {
      const text = localize(doc.text)
      const { first } = await startShell(/--listen\b/.test(text) ? text : `${text} --listen 127.0.0.1:0`)
      checkPrints(doc, first)
      local.apiUrl = String(first.url)
      const page = await fetch(`${local.apiUrl}/`)
      expect(page.status).toBe(200)
      expect(page.headers.get('content-type')).toMatch(/text\/html/)
      const status = await fetch(`${local.apiUrl}/status.json`)
      expect(status.status).toBe(200)
      expect(((await status.json()) as { model: { name: string } }).model.name).toBe('stories260K')
      const icon = await fetch(`${local.apiUrl}/favicon.ico`)
      expect(icon.status).toBe(200)
      expect(icon.headers.get('content-type')).toMatch(/^image\//)
    }
  },
  {
    match: /^curl http:\/\/127\.0\.0\.1:8080\//,
    order: 5,
    run: async (doc) => {
      if (!CURL && !process.env.CI) return // said in the test's name
      const r = await runShell(`${localize(doc.text)} --silent --show-error --fail`)
      expectOk(doc, r)
      const body = JSON.parse(r.stdout)
      const content = body.choices?.[0]?.message?.content ?? body.choices?.[0]?.text
      expect(typeof content === 'string' && content.length > 0, r.stdout.slice(0, 500)).toBe(true)
      expect(body.layerswarm, 'the verification report').toBeDefined()
    }
  },
  {
    // Last: its node would otherwise turn the chained generate above into a two-hop chain.
    match: /^layerswarm join\b/,
    order: 9,
    run: async (doc) => {
      const { child, first } = await startShell(localize(doc.text), 90_000)
      expect(first.event).toBe('serving')
      expect(first.layers).toHaveLength(2)
      const [a, b] = first.layers as number[]
      expect(b - a).toBe(2) // --num-blocks 2
      await stop(child)
    }
  }
]

function ruleOf(doc: DocCommand): Rule[] {
  return RULES.filter((r) => r.match.test(doc.text))
}

describe(`the commands in ${PAGES.join(' and ')} run on loopback${CURL || process.env.CI ? '' : ' (curl not found: its command is not run)'}`, () => {
  it('every command has exactly one rule (run, or skip with a reason)', () => {
    expect(all.length).toBeGreaterThan(8)
    const problems = all
      .filter((d) => ruleOf(d).length !== 1)
      .map(
        (d) =>
          `${d.file}:${d.line}: ${ruleOf(d).length} rules match \`${d.text}\` (add one to RULES: run it, or skip it saying why)`
      )
    expect(problems).toEqual([])
  })

  const ordered = all
    .map((doc, i) => ({ doc, rule: ruleOf(doc)[0], i }))
    .filter((x) => x.rule !== undefined)
    .sort((x, y) => x.rule.order - y.rule.order || x.i - y.i)
  for (const { doc, rule } of ordered) {
    const name = `${doc.file}:${doc.line}: ${doc.text.length > 90 ? `${doc.text.slice(0, 90)}…` : doc.text}`
    if (rule.skip) it.skip(`${name} (skipped: ${rule.skip})`, () => {})
    else it(name, () => rule.run?.(doc), 240_000)
  }
})
