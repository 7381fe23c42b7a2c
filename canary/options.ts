/** Defaults of the canary layer, in one place (the SDK's and the CLI's canary rate come from here). */

/** Canaries per real step for a peer with a clean record: the base rate. */
export const DEFAULT_CANARY_RATE = 0.03
