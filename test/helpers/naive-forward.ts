import type { ModelFile } from '../../shards/index.js'
import { createNaiveFamilyModel } from './naive-families.js'

/**
 * The independent float64 forward of a Llama 2 model (llama2.c run.c forward(): one token at a
 * time, weights dequantized to plain arrays). It is the family forward of naive-families.ts,
 * which on a plain `llama` file (no biases, no Q/K norms, no RoPE scaling, pairs (2i, 2i+1))
 * computes exactly run.c's steps; one implementation, so the two cannot drift apart.
 */
export function createNaiveModel(model: ModelFile): { step(token: number, pos: number): number[] } {
  return createNaiveFamilyModel(model)
}
