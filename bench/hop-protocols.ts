/** Protocol ids of the echo peer bench/hop.ts times (bench/hop-echo-peer.ts serves them). */
export const ECHO_PROTOCOL = '/layerswarm-bench/echo/1.0.0'
export const SESSION_ECHO_PROTOCOL = '/layerswarm-bench/session-echo/1.0.0'
