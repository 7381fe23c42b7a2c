/**
 * Logistic regression by batch gradient descent on standardized features, for the
 * indistinguishability tests: a simple classifier of what a peer sees (issue 16). Written out here
 * so the test depends on nothing but its own arithmetic.
 */
export interface LogisticModel {
  /** P(label 1) for a feature vector. */
  predict(x: readonly number[]): number
}

export function trainLogistic(
  xs: readonly (readonly number[])[],
  ys: readonly number[],
  o: { epochs?: number; learningRate?: number; l2?: number } = {}
): LogisticModel {
  if (xs.length === 0 || xs.length !== ys.length) throw new Error('trainLogistic needs as many labels as samples')
  const d = xs[0].length
  const mean = Array.from({ length: d }, (_, j) => xs.reduce((s, x) => s + x[j], 0) / xs.length)
  const sd = Array.from({ length: d }, (_, j) => Math.sqrt(xs.reduce((s, x) => s + (x[j] - mean[j]) ** 2, 0) / xs.length) || 1)
  const z = (x: readonly number[]): number[] => x.map((v, j) => (v - mean[j]) / sd[j])
  const zs = xs.map(z)
  const w = new Array<number>(d).fill(0)
  let b = 0
  const lr = o.learningRate ?? 0.1
  const l2 = o.l2 ?? 1e-3
  const sigmoid = (t: number): number => 1 / (1 + Math.exp(-t))
  for (let epoch = 0; epoch < (o.epochs ?? 2000); epoch++) {
    const gw = new Array<number>(d).fill(0)
    let gb = 0
    for (let i = 0; i < zs.length; i++) {
      const err = sigmoid(zs[i].reduce((s, v, j) => s + v * w[j], b)) - ys[i]
      for (let j = 0; j < d; j++) gw[j] += err * zs[i][j]
      gb += err
    }
    for (let j = 0; j < d; j++) w[j] -= lr * (gw[j] / zs.length + l2 * w[j])
    b -= (lr * gb) / zs.length
  }
  return { predict: (x) => sigmoid(z(x).reduce((s, v, j) => s + v * w[j], b)) }
}
