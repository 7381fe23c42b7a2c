/**
 * What a node learns from its connections opening and closing (issue #39):
 * - an owner whose last connection closed has its unused sessions freed soon
 *   (SessionManager.ownerGone, orphanTimeoutMs), and one that comes back keeps them;
 * - a peer seen on a connection proved, by its Noise handshake, that a live peer holds its key:
 *   its announcement is confirmed and outranks unconfirmed ones in the store.
 */
import type { Connection, PeerId } from '@libp2p/interface'
import type { AnnouncementStore, Host } from '../../protocol/index.js'
import type { SessionManager } from './session-manager.js'

export function watchConnections(
  host: Host,
  sessions: SessionManager,
  announcements: AnnouncementStore,
  signal: AbortSignal
): void {
  // libp2p sends peer:disconnect once a peer's last connection closed
  const onGone = (evt: CustomEvent<PeerId>): void => {
    sessions.ownerGone(evt.detail.toString())
  }
  const onOpen = (evt: CustomEvent<Connection>): void => {
    const peer = evt.detail.remotePeer.toString()
    sessions.ownerBack(peer)
    announcements.confirm(peer)
  }
  host.addEventListener('peer:disconnect', onGone)
  host.addEventListener('connection:open', onOpen)
  signal.addEventListener(
    'abort',
    () => {
      host.removeEventListener('peer:disconnect', onGone)
      host.removeEventListener('connection:open', onOpen)
    },
    { once: true }
  )
}
