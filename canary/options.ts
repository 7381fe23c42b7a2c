/** Defaults of the canary layer, in one place (the SDK's and the CLI's canary rate come from here). */

/** Canaries per real step for a peer with a clean record: the base rate. */
export const DEFAULT_CANARY_RATE = 0.03

/**
 * Decoy sessions of a peer below the evidence threshold kept in flight at once
 * (canary/adaptive-rate.ts `inFlight`, SDK `canaries.adaptive.inFlight`).
 */
export const DEFAULT_DECOYS_IN_FLIGHT = 4
