// The status page: polls /status.json and draws the swarm. Plain ES module, no build step.
const POLL_MS = 2000
const HISTORY = 60
const $ = (id) => document.getElementById(id)
const tps = []
let key = sessionStorage.getItem('layerswarm-key') || ''
let lastOk = 0

const esc = (s) =>
  String(s).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c])
const short = (id) => (id.length > 14 ? `${id.slice(0, 4)}…${id.slice(-6)}` : id)
const fmt = (n, d = 0) => (n >= 1e6 ? `${(n / 1e6).toFixed(1)}M` : n >= 1e4 ? `${(n / 1e3).toFixed(1)}k` : Number(n).toFixed(d))
const ago = (ms) => (ms < 1500 ? 'now' : ms < 90_000 ? `${Math.round(ms / 1000)} s ago` : `${Math.round(ms / 60_000)} min ago`)

/** A stable hue per peer, so the same peer has the same colour in the map, the table and routes. */
function hue(id) {
  let h = 2166136261
  for (let i = 0; i < id.length; i++) h = Math.imul(h ^ id.charCodeAt(i), 16777619)
  // 30…330: reds are kept for excluded peers and gaps.
  return 30 + ((h >>> 0) % 300)
}
const peerColor = (id, light = 62) => `hsl(${hue(id)} 75% ${light}%)`

function trustPill(p) {
  if (p.banned || p.trust?.excluded) return `<span class="pill bad" title="excluded from routes">excluded</span>`
  if (!p.trust) return `<span class="pill none" title="no canary has checked this peer yet">unchecked</span>`
  const post = p.trust.posterior
  const cls = post < 0.1 ? 'ok' : post < 0.5 ? 'warn' : 'bad'
  const label = cls === 'ok' ? 'trusted' : cls === 'warn' ? 'suspect' : 'likely tampering'
  return `<span class="pill ${cls}" title="P(tampering) = ${post.toExponential(2)} after ${p.trust.observations} canary checks">${label} · ${post.toFixed(3)}</span> <span class="sub">${p.trust.canaries_sent} canaries</span>`
}

function drawMap(s) {
  const n = s.model.blocks
  const [from, to] = s.model.remote
  const maxTp = Math.max(1, ...s.peers.map((p) => p.throughput))
  const cells = (cls = 'cell') =>
    Array.from({ length: n }, (_, b) => `<div class="${cls}" style="grid-column:${b + 2}"></div>`).join('')
  const head = Array.from(
    { length: n },
    (_, b) => `<div class="cell${b >= from && b < to ? ' remote' : ''}" style="grid-column:${b + 2}">${b}</div>`
  ).join('')
  const rows = [`<div class="row head"><div class="who sub">block</div>${head}</div>`]
  const edge = []
  const e = s.model.edge
  if (e.first[1] > e.first[0]) edge.push(e.first)
  if (e.last[1] > e.last[0]) edge.push(e.last)
  rows.push(
    `<div class="row" data-edge><div class="who"><b>gateway</b><span class="tag">local edge</span></div>${cells()}${edge
      .map(
        ([a, b]) =>
          `<div class="bar edge" style="grid-column:${a + 2}/${b + 2}" title="blocks [${a}, ${b}) run in the gateway">[${a}, ${b})</div>`
      )
      .join('')}</div>`
  )
  if (s.peers.length === 0)
    rows.push(`<div class="empty">No peer of this model answered yet${s.swarm.error ? `: ${esc(s.swarm.error)}` : ''}.</div>`)
  for (const p of s.peers) {
    const bad = p.banned || p.trust?.excluded
    const light = 38 + Math.round((p.throughput / maxTp) * 30)
    const bg = bad
      ? ''
      : `;background:linear-gradient(90deg, ${peerColor(p.peer_id, light - 10)}, ${peerColor(p.peer_id, light + 8)})`
    const style = `grid-column:${p.start + 2}/${p.end + 2}${bg}`
    rows.push(
      `<div class="row" data-peer-id="${esc(p.peer_id)}"><div class="who" title="${esc(p.peer_id)}"><span class="pid">${esc(short(p.peer_id))}</span><span class="tag">${esc(p.version)}</span></div>${cells()}` +
        `<div class="bar${bad ? ' excluded' : ''}" data-span="${p.start}:${p.end}" style="${style}" title="${esc(p.peer_id)} serves [${p.start}, ${p.end}) · ${p.throughput} tok/s · ${p.rtt_ms} ms">[${p.start}, ${p.end}) · ${fmt(p.throughput)} tok/s</div></div>`
    )
  }
  const counts = s.coverage.peers_per_block
  const maxC = Math.max(1, ...counts)
  const cov = counts
    .map((c, b) => {
      const local = b < from || b >= to
      if (local) return `<div class="cell local" style="grid-column:${b + 2}" title="block ${b}: in the gateway">edge</div>`
      if (c === 0) return `<div class="cell gap" style="grid-column:${b + 2}" title="block ${b}: no peer serves it">gap</div>`
      return `<div class="cell" style="grid-column:${b + 2};background:hsl(165 65% ${28 + Math.round((c / maxC) * 30)}%)" title="block ${b}: ${c} peer(s)">${c}</div>`
    })
    .join('')
  rows.push(`<div class="row coverage"><div class="who sub">peers per block</div>${cov}</div>`)
  const map = $('map')
  map.style.setProperty('--blocks', n)
  map.innerHTML = rows.join('')
}

function drawPeers(s) {
  const maxTp = Math.max(1, ...s.peers.map((p) => p.throughput))
  $('peers').innerHTML =
    s.peers
      .map(
        (p) => `<tr data-peer-id="${esc(p.peer_id)}">
      <td><span class="chip" title="${esc(p.peer_id)}\n${esc(p.addrs.join('\n'))}"><i style="background:${peerColor(p.peer_id)}"></i><span class="mono">${esc(short(p.peer_id))}</span></span></td>
      <td class="mono">[${p.start}, ${p.end})</td>
      <td><span class="meter"><b style="width:${Math.round((p.throughput / maxTp) * 100)}%"></b></span>${fmt(p.throughput)} tok/s</td>
      <td>${p.rtt_ms.toFixed(1)} ms${p.reachability && p.reachability !== 'direct' ? ` · ${esc(p.reachability)}` : ''}</td>
      <td>${fmt(p.free_cache_tokens)} tok</td>
      <td class="mono">${esc(p.version)}</td>
      <td>${trustPill(p)}</td>
      <td>${p.routed}</td></tr>`
      )
      .join('') || `<tr><td colspan="8" class="empty">No peers yet.</td></tr>`
  const gone = s.excluded.filter((id) => !s.peers.some((p) => p.peer_id === id))
  $('peers-sub').textContent = gone.length
    ? `also excluded, not answering: ${gone.map(short).join(', ')}`
    : `seen ${ago(s.now - s.swarm.refreshed_at)}`
}

function drawRecent(s) {
  $('recent').innerHTML =
    s.recent
      .map((g) => {
        const route = g.route
          .map(
            (h) =>
              `<span class="hop" style="background:${peerColor(h.peerId)}" title="${esc(h.peerId)}">${esc(short(h.peerId))} [${h.start},${h.end})</span>`
          )
          .join('')
        const rate = g.ms > 0 ? (g.completionTokens * 1000) / g.ms : 0
        return `<li><span class="sub">${ago(s.now - g.at)}</span><span>${g.endpoint}</span><span class="route">${route}${g.failovers ? ` <span class="pill warn">${g.failovers} failover</span>` : ''}</span><span class="nums">${g.promptTokens}+${g.completionTokens} tok · ${g.ms} ms · ${rate.toFixed(1)} tok/s · ${g.finish}</span></li>`
      })
      .join('') ||
    `<li class="empty">No generations yet. Try: <code>curl ${esc(location.origin)}/v1/completions -H 'content-type: application/json' -d '{"model":"${esc(s.model.name)}","prompt":"Once upon a time"}'</code></li>`
}

function drawSpark() {
  const w = 240
  const h = 48
  const max = Math.max(1, ...tps)
  const pts = tps.map((v, i) => [(i / Math.max(1, tps.length - 1)) * w, h - 4 - (v / max) * (h - 10)])
  if (pts.length < 2) return
  const line = pts.map(([x, y], i) => `${i ? 'L' : 'M'}${x.toFixed(1)},${y.toFixed(1)}`).join('')
  $('spark-line').setAttribute('d', line)
  $('spark-fill').setAttribute('d', `${line}L${pts[pts.length - 1][0].toFixed(1)},${h}L0,${h}Z`)
}

function draw(s) {
  $('model-name').textContent = s.model.name
  $('model-id').textContent = s.model.id.slice(0, 16)
  $('model-id').title = `model id ${s.model.id}`
  $('auth-badge').hidden = !s.gateway.auth
  const live = s.peers.filter((p) => !p.banned && !p.trust?.excluded).length
  $('kpi-peers').textContent = String(live)
  $('kpi-peers-sub').textContent = `${s.peers.length} answering · ${s.excluded.length} excluded`
  const [from, to] = s.model.remote
  const counts = s.coverage.peers_per_block.slice(from, to)
  const covered = counts.filter((c) => c > 0).length
  $('kpi-coverage').textContent = `${covered}/${to - from}`
  $('kpi-coverage').parentElement.classList.toggle('gapped', s.coverage.gaps.length > 0)
  $('kpi-coverage-sub').textContent = s.coverage.gaps.length
    ? `gaps: ${s.coverage.gaps.map(([a, b]) => (b - a > 1 ? `[${a}, ${b})` : `${a}`)).join(', ')}`
    : `remote blocks covered · min ${Math.min(...counts)}× redundancy`
  $('kpi-sessions').textContent = String(s.live.sessions)
  $('kpi-sessions-sub').textContent = `${s.live.sessions_total} total · max ${s.gateway.max_concurrent} at once`
  $('kpi-tps').textContent = s.live.tokens_per_second.toFixed(1)
  $('kpi-tokens-sub').textContent =
    `· ${fmt(s.live.tokens_total)} tokens · ${s.live.requests_total} requests · ${s.live.errors_total} errors`
  tps.push(s.live.tokens_per_second)
  if (tps.length > HISTORY) tps.shift()
  drawSpark()
  drawMap(s)
  drawPeers(s)
  drawRecent(s)
  $('api-base').textContent = `${location.origin}/v1`
  document.body.dataset.ready = 'true'
}

function setLive(state, text) {
  $('live').className = `live ${state}`
  $('live-text').textContent = text
}

async function poll() {
  try {
    const res = await fetch('/status.json', { headers: key ? { authorization: `Bearer ${key}` } : {}, cache: 'no-store' })
    if (res.status === 401) {
      $('keyform').hidden = false
      $('main').hidden = true
      setLive('down', 'API key needed')
      return
    }
    if (!res.ok) throw new Error(`HTTP ${res.status}`)
    const s = await res.json()
    $('keyform').hidden = true
    $('main').hidden = false
    draw(s)
    lastOk = Date.now()
    setLive(s.swarm.error ? 'stale' : 'ok', s.swarm.error ? 'swarm unreachable' : 'live')
  } catch (err) {
    setLive(Date.now() - lastOk < 10_000 ? 'stale' : 'down', `gateway unreachable (${err.message})`)
  } finally {
    setTimeout(poll, POLL_MS)
  }
}

$('keyform').addEventListener('submit', (ev) => {
  ev.preventDefault()
  key = $('key').value.trim()
  sessionStorage.setItem('layerswarm-key', key)
  $('keyform').hidden = true
})

poll()
