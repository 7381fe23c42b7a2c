import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Command, InvalidArgumentError, Option } from 'commander'
import { describe, expect, it } from 'vitest'
import { applyConfig, isLoopbackHost, parseHostPort, withConfig } from '../../node/config.js'
import { Metrics } from '../../node/daemon/metrics.js'
import { createChatFormatter, PLAIN_STOP } from '../../node/gateway/chat-template.js'
import { toApiError } from '../../node/gateway/errors.js'
import { hostAllowed } from '../../node/gateway/server.js'
import { coverageGaps } from '../../node/gateway/status.js'
import { StopMatcher } from '../../node/gateway/stop-sequences.js'
import { progress } from '../../node/log.js'

function command(action: (opts: Record<string, unknown>) => void): Command {
  const cmd = new Command('api').exitOverride()
  cmd
    .option('--bootstrap <addrs>', 'peers')
    .option('--listen <host:port>', 'address', '127.0.0.1:8080')
    .option('--api-key <key>', 'key')
    .option('--json', 'json', false)
    .addOption(new Option('--forwarding <mode>', 'mode').choices(['relay', 'chain']).default('relay'))
    .addOption(
      new Option('--max-concurrent <n>', 'n')
        .argParser((v) => {
          const n = Number(v)
          if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError('--max-concurrent must be an integer ≥ 1')
          return n
        })
        .default(4)
    )
  withConfig(cmd, { required: ['bootstrap'] }).action((opts) => action(opts))
  return cmd
}

async function parse(args: string[], env: NodeJS.ProcessEnv = {}): Promise<Record<string, unknown>> {
  let got: Record<string, unknown> = {}
  const cmd = command((o) => {
    got = o
  })
  // withConfig reads process.env; swap in the test's environment around the parse.
  const saved = { ...process.env }
  for (const k of Object.keys(process.env)) if (k.startsWith('LAYERSWARM_')) delete process.env[k]
  Object.assign(process.env, env)
  try {
    await cmd.parseAsync(args, { from: 'user' })
  } finally {
    for (const k of Object.keys(process.env)) if (!(k in saved)) delete process.env[k]
    Object.assign(process.env, saved)
  }
  return got
}

describe('config: command line > environment > config file > defaults', () => {
  const dir = mkdtempSync(join(tmpdir(), 'layerswarm-config-'))
  const file = join(dir, 'api.json')
  writeFileSync(
    file,
    JSON.stringify({
      bootstrap: '/ip4/1.2.3.4/tcp/1',
      'max-concurrent': 7,
      apiKey: 'from-file-key',
      forwarding: 'chain',
      json: true
    })
  )

  it('takes each option from the highest source that has it, through the option parser', async () => {
    const o = await parse(['--config', file, '--listen', '0.0.0.0:9000'], {
      LAYERSWARM_MAX_CONCURRENT: '9',
      LAYERSWARM_API_KEY: 'from-env-key'
    })
    expect(o).toMatchObject({
      bootstrap: '/ip4/1.2.3.4/tcp/1',
      listen: '0.0.0.0:9000',
      maxConcurrent: 9,
      apiKey: 'from-env-key',
      forwarding: 'chain',
      json: true
    })
    expect(await parse(['--config', file])).toMatchObject({ maxConcurrent: 7, listen: '127.0.0.1:8080' })
    expect(await parse([], { LAYERSWARM_CONFIG: file, LAYERSWARM_JSON: 'false' })).toMatchObject({
      json: false,
      apiKey: 'from-file-key'
    })
  })

  it('rejects bad values, unknown keys and missing required options with clear errors', async () => {
    await expect(parse(['--bootstrap', 'x'], { LAYERSWARM_MAX_CONCURRENT: '0' })).rejects.toMatchObject({
      code: 'CONFIG',
      message: expect.stringContaining('LAYERSWARM_MAX_CONCURRENT')
    })
    await expect(parse(['--bootstrap', 'x'], { LAYERSWARM_FORWARDING: 'teleport' })).rejects.toThrow(/not one of relay, chain/)
    const typo = join(dir, 'typo.json')
    writeFileSync(typo, JSON.stringify({ bootstrapp: 'x' }))
    await expect(parse(['--config', typo, '--bootstrap', 'x'])).rejects.toThrow(/unknown option bootstrapp/)
    await expect(parse([])).rejects.toThrow(/required option '--bootstrap <addrs>' not specified/)
    expect(() =>
      applyConfig(new Command().option('--config <f>').setOptionValueWithSource('config', join(dir, 'none.json'), 'cli'))
    ).toThrow(/cannot read/)
  })

  it('parses listen addresses and knows loopback', () => {
    expect(parseHostPort('127.0.0.1:8080')).toEqual({ host: '127.0.0.1', port: 8080 })
    expect(parseHostPort('[::1]:9')).toEqual({ host: '::1', port: 9 })
    expect(parseHostPort('9090')).toEqual({ host: '127.0.0.1', port: 9090 })
    expect(() => parseHostPort('nope')).toThrow(/HOST:PORT/)
    expect(['127.0.0.1', '127.3.0.1', '::1', 'localhost'].every(isLoopbackHost)).toBe(true)
    expect(['0.0.0.0', '::', '192.168.1.2', 'example.com'].some(isLoopbackHost)).toBe(false)
  })
})

describe('stop sequences', () => {
  it('never emits part of a stop sequence, split across pieces or not', () => {
    const m = new StopMatcher(['\n\nUser:', 'END'])
    const out = ['Hello', ' wor', 'ld\n', '\nUs', 'er: more'].map((p) => m.push(p)).join('')
    expect(out).toBe('Hello world')
    expect(m.stopped).toBe(true)
    const n = new StopMatcher(['END'])
    expect(n.push('the EN') + n.push('jOY')).toBe('the ENjOY')
    expect(n.push('E') + n.flush()).toBe('E')
  })
})

describe('chat formats', () => {
  const messages = [
    { role: 'system' as const, content: 'Be brief.' },
    { role: 'user' as const, content: 'Hi' }
  ]
  it('renders the plain documented format without a template', () => {
    const f = createChatFormatter({ bosToken: '<s>', eosToken: '</s>' })
    expect(f.kind).toBe('plain')
    expect(f.render(messages)).toBe('System: Be brief.\n\nUser: Hi\n\nAssistant:')
    expect(f.stops).toEqual([PLAIN_STOP])
  })
  it('renders a GGUF Jinja template, without doubling BOS', () => {
    const template =
      '{{ bos_token }}{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{{ eos_token }}{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}'
    const f = createChatFormatter({ template, bosToken: '<s>', eosToken: '</s>' })
    expect(f.render(messages)).toBe('<|system|>Be brief.</s><|user|>Hi</s><|assistant|>')
    const strict = createChatFormatter({
      template: "{{ raise_exception('roles must alternate') }}",
      bosToken: '<s>',
      eosToken: '</s>'
    })
    expect(() => strict.render(messages)).toThrow(/roles must alternate/)
  })
})

describe('gateway errors and status', () => {
  it('maps typed errors to OpenAI status codes', () => {
    expect(toApiError(Object.assign(new Error('all full'), { code: 'BUSY' })).status).toBe(429)
    expect(toApiError(Object.assign(new Error('no peer for block 3'), { code: 'NO_ROUTE' })).toJSON().error).toMatchObject({
      type: 'service_unavailable',
      code: 'no_route'
    })
    expect(toApiError(Object.assign(new Error('big'), { code: 'FST_ERR_CTP_BODY_TOO_LARGE', statusCode: 413 })).status).toBe(413)
    expect(toApiError(new Error('boom')).status).toBe(500)
    // a 500 names the code only: an internal message may carry paths or another request's state
    const internal = toApiError(Object.assign(new Error('/home/x/secret.gguf: EACCES'), { code: 'EACCES' })).toJSON().error
    expect(internal.message).not.toContain('secret')
    expect(internal.code).toBe('EACCES')
  })

  it('answers keyless only to loopback Host headers (no DNS rebinding)', () => {
    for (const h of ['localhost', 'localhost:8080', '127.0.0.1:8080', '[::1]:8080', 'app.localhost:1'])
      expect(hostAllowed(h), h).toBe(true)
    for (const h of [undefined, 'evil.example:8080', 'evil.example', '10.0.0.1:8080', '127.0.0.1.evil.example'])
      expect(hostAllowed(h), String(h)).toBe(false)
  })
  it('finds coverage gaps as ranges inside the remote span', () => {
    expect(coverageGaps([1, 0, 0, 2, 0, 0], 1, 5)).toEqual([
      [1, 3],
      [4, 5]
    ])
    expect(coverageGaps([0, 1, 1, 0], 1, 3)).toEqual([])
  })
})

describe('metrics and progress', () => {
  it('exposes the node instruments in Prometheus text', async () => {
    const m = new Metrics({ role: 'node', defaultMetrics: false })
    m.recordStep('prefill', 12, 0.004)
    m.recordStep('decode', 1, 0.0008)
    m.sessionOpened()
    m.kvCache(100, 900)
    m.error('BUSY')
    m.bytes('in', 2048)
    m.canary('pass', 3)
    const text = await m.text()
    expect(text).toContain('layerswarm_tokens_total{phase="prefill",role="node"} 12')
    expect(text).toMatch(/layerswarm_step_duration_seconds_count\{(role="node",phase="decode"|phase="decode",role="node")\} 1/)
    expect(text).toContain('layerswarm_sessions_active{role="node"} 1')
    expect(text).toContain('layerswarm_kv_cache_tokens{state="free",role="node"} 900')
    expect(text).toContain('layerswarm_errors_total{code="BUSY",role="node"} 1')
    expect(text).toContain('layerswarm_wire_bytes_total{direction="in",role="node"} 2048')
    expect(text).toContain('layerswarm_canary_checks_total{verdict="pass",role="node"} 3')
  })
  it('draws progress only on a terminal', () => {
    const written: string[] = []
    const sink = (isTTY: boolean) =>
      Object.assign({ write: (s: string) => written.push(s) > 0, isTTY, columns: 80 }) as unknown as NodeJS.WritableStream
    const pipe = progress('loading', 10, { stream: sink(false) })
    pipe.tick(10)
    pipe.done()
    expect(written).toEqual([])
    const tty = progress('loading', 4, { stream: sink(true), intervalMs: 0, unit: 'blocks' })
    tty.tick()
    tty.done()
    expect(written.join('')).toContain('loading')
    expect(written.join('')).toContain('1/4 blocks')
    expect(written[written.length - 1]).toBe('\n')
  })
})
