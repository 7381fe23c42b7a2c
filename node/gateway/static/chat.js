// The chat page: asks the gateway for the model and the swarm's WebSocket addresses, starts the
// browser SDK in a Web Worker (/browser/layerswarm-worker.js) and streams its tokens here.
// State for tools and tests: #state[data-state] (loading, ready, generating, done, error) and
// #output[data-tokens] (the completion's token ids, comma-separated).
const $ = (id) => document.getElementById(id)
const state = (s, text) => {
  $('state').dataset.state = s
  $('state').textContent = text ?? s
}
const showError = (where, e) => {
  state('error', `${where}: ${e.code ?? 'error'}`)
  $('meta').innerHTML = ''
  const p = document.createElement('span')
  p.className = 'err'
  p.textContent = `${e.message} (${e.code ?? 'error'})`
  $('meta').append(p)
}

let nextId = 1
let current = null

async function start() {
  if (!self.crossOriginIsolated)
    throw Object.assign(
      new Error('the page is not cross-origin isolated (COOP/COEP headers missing): WebAssembly shared memory is unavailable'),
      { code: 'NOT_ISOLATED' }
    )
  // A gateway with --api-key wants it on its data routes: #api-key=KEY (fragments stay in the browser)
  const fragment = new URLSearchParams(location.hash.slice(1))
  const apiKey = fragment.get('api-key')
  const headers = apiKey ? { authorization: `Bearer ${apiKey}` } : {}
  const res = await fetch('/browser.json', { headers })
  if (res.status === 401)
    throw Object.assign(new Error('this gateway needs its API key: open /chat#api-key=KEY'), { code: 'API_KEY' })
  if (!res.ok) throw Object.assign(new Error(`/browser.json answered HTTP ${res.status}`), { code: 'GATEWAY' })
  const info = await res.json()
  $('model-name').textContent = info.model.name
  $('model-id').textContent = info.model.id
  if (!info.model.gguf)
    throw Object.assign(new Error('the browser client reads GGUF models only; this gateway serves another format'), {
      code: 'NOT_GGUF'
    })
  if (info.bootstrap.length === 0)
    throw Object.assign(
      new Error(
        'the gateway knows no peer with a /ws address: start nodes with --listen /ip4/…/tcp/N/ws, or pass layerswarm api --browser-bootstrap'
      ),
      { code: 'NO_WS_PEERS' }
    )
  // The canary bank's key comes with the page's address (#bank-key=HEX: a fragment never reaches
  // the server); without it canaries are off in this tab.
  const keyHex = fragment.get('bank-key')
  const bankKey =
    keyHex && /^[0-9a-f]{64}$/i.test(keyHex) ? Uint8Array.from(keyHex.match(/../g), (h) => Number.parseInt(h, 16)) : null
  // #head=remote: the LM head runs on the last block's peer (issue #35), which then learns the
  // output distribution, hence the text (docs/security.md); the tab holds a few head rows only
  const head = fragment.get('head') === 'remote' ? 'remote' : 'local'
  // #head-rows=N: the secret head rows it fetches and checks with (default 1024)
  const headRows = Number(fragment.get('head-rows'))
  const worker = new Worker('/browser/layerswarm-worker.js', { type: 'module' })
  worker.onerror = (e) => showError('worker', { message: e.message, code: 'WORKER' })
  worker.onmessage = (e) => onReply(e.data)
  // for tools and tests (the known-answer self-test: post { type: 'kat', vectors })
  self.layerswarmWorker = worker
  state('loading', 'fetching the model edge, joining the swarm…')
  worker.postMessage({
    type: 'init',
    init: {
      bootstrap: info.bootstrap,
      modelUrl: new URL(info.model.url, location.href).href,
      edgeFirst: info.edge.first,
      edgeLast: head === 'remote' ? 0 : info.edge.last,
      head,
      ...(head === 'remote' && Number.isInteger(headRows) && headRows > 0 ? { headSecretRows: headRows } : {}),
      wireDtype: 'f32',
      routeTimeoutMs: 30000,
      headers,
      ...(info.canaryBank && bankKey ? { canaryBank: { url: new URL(info.canaryBank, location.href).href, key: bankKey } } : {})
    }
  })
  $('form').onsubmit = (ev) => {
    ev.preventDefault()
    if (current) return
    current = { id: nextId++, text: '', startedAt: performance.now() }
    const out = $('output')
    out.textContent = ''
    delete out.dataset.tokens
    const prompt = document.createElement('span')
    prompt.className = 'prompt'
    prompt.textContent = $('prompt').value
    out.append(prompt, document.createElement('span'))
    $('go').disabled = true
    state('generating')
    worker.postMessage({
      type: 'generate',
      id: current.id,
      prompt: $('prompt').value,
      maxTokens: Number($('max-tokens').value),
      temperature: Number($('temperature').value)
    })
  }
}

function onReply(m) {
  if (m.type === 'ready') {
    $('meta').textContent =
      `edge blocks on ${m.kernels} kernels in this tab; fetched ${(m.fetchedBytes / 1024).toFixed(0)} KiB of the ${(m.totalBytes / 1024).toFixed(0)} KiB model`
    $('go').disabled = false
    state('ready')
  } else if (m.type === 'token' && current?.id === m.id) {
    current.text += m.text
    $('output').lastChild.textContent = current.text
  } else if (m.type === 'rollback' && current?.id === m.id) {
    current.text = current.text.slice(0, m.position)
  } else if (m.type === 'done' && current?.id === m.id) {
    $('output').lastChild.textContent = m.text
    $('output').dataset.tokens = m.tokens.join(',')
    const hops =
      m.routes
        .at(-1)
        ?.map((h) => `${h.peerId.slice(-6)} [${h.start},${h.end})`)
        .join(' → ') ?? ''
    const sent = m.canaries.reduce((n, c) => n + (c.canariesSent ?? 0), 0)
    const flagged = m.canaries.filter((c) => c.excluded).length
    const checks = m.canaries.length > 0 ? `canaries sent: ${sent}, peers excluded: ${flagged}` : 'canaries: off (no bank)'
    const seconds = (performance.now() - current.startedAt) / 1000
    const headText = m.head
      ? `; head on a peer: ${m.head.checks} checks, ${m.head.violations} violations, ${m.head.memory?.rowsHeld ?? 0} rows held`
      : ''
    $('meta').textContent =
      `${m.tokens.length} tokens in ${seconds.toFixed(1)} s through ${hops}; receipts checked: ${m.receipts.checked}; ${checks}${headText}`
    current = null
    $('go').disabled = false
    state('done')
  } else if (m.type === 'error') {
    if (m.id !== undefined) current = null
    $('go').disabled = m.id === undefined
    showError(m.id === undefined ? 'start' : 'generate', m)
  }
}

start().catch((e) => showError('start', e))
