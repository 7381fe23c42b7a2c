import { describe, expect, it } from 'vitest'
import { hostAllowed, metricsHostAllowed } from '../../node/daemon/host-check.js'

// issue #39: the metrics endpoint checks Host headers as the keyless gateway does
describe('metrics Host check', () => {
  it('on loopback answers only loopback names, as the gateway', () => {
    for (const h of ['localhost:9100', '127.0.0.1:9100', '[::1]:9100', 'LOCALHOST'])
      expect(metricsHostAllowed(h, '127.0.0.1'), h).toBe(true)
    for (const h of [undefined, 'evil.example:9100', '10.0.0.1:9100', '192.168.1.4'])
      expect(metricsHostAllowed(h, '127.0.0.1'), String(h)).toBe(false)
    expect(hostAllowed('LocalHost:1')).toBe(true)
  })

  it('bound to a network address, answers IP literals and the bound name, never another name', () => {
    for (const h of ['10.0.0.1:9100', '[fd00::1]:9100', 'metrics.lan:9100', 'METRICS.LAN', 'localhost'])
      expect(metricsHostAllowed(h, 'metrics.lan'), h).toBe(true)
    for (const h of [undefined, 'rebind.example:9100', 'metrics.lan.evil.example'])
      expect(metricsHostAllowed(h, 'metrics.lan'), String(h)).toBe(false)
    expect(metricsHostAllowed('192.168.1.4:9100', '0.0.0.0')).toBe(true)
    expect(metricsHostAllowed('rebind.example', '0.0.0.0')).toBe(false)
  })
})
