/**
 * Defaults of the protocol layer's own settings, in one place (wire size caps are in limits.ts).
 * A node passes its own announce interval (node/options.ts, `--announce-interval`).
 */

/** Milliseconds between the announcer's signed publishes when its caller gives none. */
export const DEFAULT_PUBLISH_INTERVAL_MS = 10_000

/**
 * Longest lifetime an announcement may claim (expiry minus issue time) and still be accepted
 * (issue #39: anyone could sign a 1 h one and outlive every honest entry). An honest node's is
 * 3 × its announce interval (15 s by default), capped at this.
 */
export const DEFAULT_MAX_ANNOUNCEMENT_LIFETIME_MS = 2 * 60 * 1000

/** How far in the future an announcement's issue time may be (peers' clocks differ). */
export const DEFAULT_MAX_CLOCK_SKEW_MS = 30_000

/** Milliseconds one pull of a neighbour's announcements may take (announcement-sync.ts). */
export const DEFAULT_ANNOUNCEMENT_PULL_TIMEOUT_MS = 5_000

/** Connections a host keeps open at once (libp2p's connection manager closes the rest). */
export const DEFAULT_MAX_CONNECTIONS = 256
