/**
 * Gossipsub peer scoring for layerswarm, chosen parameter by parameter (gossipsub v1.1 spec,
 * libp2p/specs pubsub/gossipsub/gossipsub-v1.1.md, "Peer Scoring"). Who may be penalised,
 * for what, and for how long:
 *
 * - P6, IP colocation: OFF (weight 0). The stock setting (more than 10 peer ids from one IP
 *   cost −5 × surplus², kept for an hour after they leave) is meant against Sybils flooding
 *   a mesh. Here it hit honest users: every CLI run is a new peer id from the same address,
 *   as are peers behind one NAT, so after ~10 runs the bootstrap peer pushed every local
 *   peer below the gossip threshold and the swarm vanished from new clients. Sybils gain
 *   little in this topic anyway: each announcement carries its author's own signature
 *   (announce.ts), and clients verify every peer they route through with `info` and canaries.
 * - P4, invalid messages on the announce topic: ON. A peer that relays an announcement that
 *   fails verification (bad signature, signer ≠ peer id, expired, malformed) scores
 *   −10 × count² × topic weight 1; the count decays ×0.99 per second (half-life ~70 s), so
 *   one bad relay only drops it to the gossip threshold for a minute or so, three put it on
 *   the graylist (−80) for several minutes.
 * - P7, behaviour penalty (broken IWANT promises, GRAFT during backoff): the stock setting,
 *   which decays ×0.2 per second: protocol misbehaviour, not load or address.
 * - P1/P2 (time in mesh, first deliveries) give small positive credit; P3/P3b (too few mesh
 *   deliveries) are OFF: announcements are sparse by design (one per peer per interval), so
 *   a quiet mesh peer is normal, not a sign of censorship.
 * - Retention: a departed peer's negative score is kept 10 minutes (stock: 1 hour), long
 *   enough that reconnecting does not wash out a P4/P7 penalty, short enough that nothing
 *   honest is remembered; honest short-lived clients leave with a score of 0.
 */
import { ANNOUNCE_TOPIC } from './ids.js'

/** How long a departed peer's score is kept (gossipsub v1.1 `RetainScore`). */
export const GOSSIP_RETAIN_SCORE_MS = 10 * 60_000

/** `scoreParams` for @libp2p/gossipsub (partial: the library fills in the rest). */
export function gossipScoreParams(topic: string = ANNOUNCE_TOPIC) {
  return {
    IPColocationFactorWeight: 0,
    retainScore: GOSSIP_RETAIN_SCORE_MS,
    topics: {
      [topic]: {
        topicWeight: 1,
        timeInMeshWeight: 0.01,
        timeInMeshQuantum: 1_000,
        timeInMeshCap: 300,
        firstMessageDeliveriesWeight: 0.5,
        firstMessageDeliveriesDecay: 0.9,
        firstMessageDeliveriesCap: 20,
        // P3/P3b off (weight 0); the rest are the library's values, unused at weight 0
        meshMessageDeliveriesWeight: 0,
        meshMessageDeliveriesDecay: 0.5,
        meshMessageDeliveriesCap: 100,
        meshMessageDeliveriesThreshold: 20,
        meshMessageDeliveriesWindow: 10,
        meshMessageDeliveriesActivation: 5_000,
        meshFailurePenaltyWeight: 0,
        meshFailurePenaltyDecay: 0.5,
        invalidMessageDeliveriesWeight: -10,
        invalidMessageDeliveriesDecay: 0.99
      }
    }
  }
}
