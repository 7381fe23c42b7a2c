import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { PARAMETERS } from '../../node/gateway/parameters.js'
import { ROUTES } from '../../node/gateway/server.js'

// Issue 37: docs/gateway.md lists every endpoint and parameter as supported, ignored or refused,
// and that list is the code's (node/gateway/parameters.ts, which the routes check requests against).

const doc = readFileSync(new URL('../../docs/gateway.md', import.meta.url), 'utf8')

describe('docs/gateway.md agrees with the gateway', () => {
  it('the parameter table is PARAMETERS, row for row', () => {
    const rows = [...doc.matchAll(/^\| *`(\/v1\/[\w/]+)` *\| *`(\w+)` *\| *(supported|ignored|refused) *\|$/gm)].map(
      (m) => `${m[1]} ${m[2]} ${m[3]}`
    )
    const code = Object.entries(PARAMETERS).flatMap(([e, ps]) => Object.entries(ps).map(([k, p]) => `${e} ${k} ${p.status}`))
    expect(rows.sort()).toEqual(code.sort())
  })

  it('every generating endpoint the server routes is in the table and named in the endpoint list', () => {
    const listed = /- Endpoints: ([^\n]+\n[^\n]+)/.exec(doc)?.[1] ?? ''
    for (const path of Object.keys(ROUTES).filter((p) => p.startsWith('/v1/'))) {
      expect(listed).toContain(`\`${path}\``)
      if (ROUTES[path].includes('POST')) expect(Object.keys(PARAMETERS)).toContain(path)
    }
  })
})
