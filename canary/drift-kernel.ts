/**
 * The Gaussian kernel of the benign drift density (drift-model.ts): bandwidth h per feature,
 * except that the (relL2, chord) pair has its own bandwidth along its diagonal, where benign
 * drift lies (a bandwidth matrix with the diagonal as a principal axis; Wand & Jones 1993).
 */
/** A feature of a drift (drift-model.ts); defined here, the leaf, so the two files form no cycle. */
export type DriftFeature = 'relL2' | 'chord' | 'peak'

/** A class's kernel: bandwidth `h`, and `hDiag` along the diagonal of features `iu` (relL2) and `iv` (chord). */
export interface KernelShape {
  readonly h: number
  readonly hDiag: number
  readonly iu: number
  readonly iv: number
}

export function kernelShape(h: number, hDiag: number | undefined, features: readonly DriftFeature[]): KernelShape {
  const iu = features.indexOf('relL2')
  const iv = features.indexOf('chord')
  const pair = hDiag !== undefined && iu >= 0 && iv >= 0
  return { h, hDiag: pair ? hDiag : h, iu: pair ? iu : -1, iv: pair ? iv : -1 }
}

/**
 * Squared scaled distance (x − p)ᵀ H⁻¹ (x − p) of point `k` (stride D) to `x`: per feature over h,
 * except the (relL2, chord) pair, rotated onto its diagonal (over hDiag) and anti-diagonal (over h).
 */
export function scaledDist2(points: readonly number[], k: number, x: readonly number[], ks: KernelShape): number {
  const D = x.length
  let s = 0
  for (let d = 0; d < D; d++) {
    if (d === ks.iu || d === ks.iv) continue
    const v = (x[d] - points[k * D + d]) / ks.h
    s += v * v
  }
  if (ks.iu >= 0) {
    const du = x[ks.iu] - points[k * D + ks.iu]
    const dv = x[ks.iv] - points[k * D + ks.iv]
    const along = (du + dv) / (Math.SQRT2 * ks.hDiag)
    const across = (du - dv) / (Math.SQRT2 * ks.h)
    s += along * along + across * across
  }
  return s
}

export function kdeSum(
  points: readonly number[],
  weights: readonly number[],
  x: readonly number[],
  ks: KernelShape,
  skip = -1
): number {
  let s = 0
  for (let k = 0; k < weights.length; k++) if (k !== skip) s += weights[k] * Math.exp(-0.5 * scaledDist2(points, k, x, ks))
  return s
}

/** Gaussian kernel normalisation in D dimensions: (2π)^(D/2) · √det H. */
export const kernelNorm = (ks: KernelShape, dims: number): number => (2 * Math.PI) ** (dims / 2) * ks.h ** (dims - 1) * ks.hDiag
