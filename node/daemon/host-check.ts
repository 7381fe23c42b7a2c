/**
 * Host-header checks of the HTTP endpoints a peer serves (the gateway, `--metrics`). A web page
 * can reach a socket on this machine or its network through DNS rebinding (its own name made to
 * resolve to 127.0.0.1 or a LAN address); the browser then sends that name as the Host header,
 * which is how the request is told from one meant for us (issue #39 for metrics).
 */
import { isIP } from 'node:net'
import { isLoopbackHost } from '../config.js'

function hostName(host: string): string {
  return (host.startsWith('[') ? host.slice(1, host.indexOf(']')) : host.replace(/:\d+$/, '')).toLowerCase()
}

/**
 * Host headers a keyless (loopback-only) gateway answers: loopback names and addresses, with
 * any port. Anything else reached a loopback socket through a name that is not ours.
 */
export function hostAllowed(host: string | undefined): boolean {
  if (host === undefined) return false
  const name = hostName(host)
  return name === 'localhost' || name.endsWith('.localhost') || (isIP(name) !== 0 && isLoopbackHost(name))
}

/**
 * Host headers the metrics endpoint answers when bound to `boundHost`. On loopback: the
 * gateway's rule. Elsewhere (the operator exposed it to a network): also any IP literal and the
 * name it was bound by, never another DNS name, so a rebinding page cannot read it from inside
 * a LAN that the page's origin cannot reach.
 */
export function metricsHostAllowed(host: string | undefined, boundHost: string): boolean {
  if (hostAllowed(host)) return true
  if (host === undefined || isLoopbackHost(boundHost)) return false
  const name = hostName(host)
  return isIP(name) !== 0 || name === boundHost.toLowerCase()
}
