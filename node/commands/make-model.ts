import type { Command } from 'commander'

/** `layerswarm make-model`: filled in by the benchmark-models work (issue 3). */
export function registerMakeModel(_program: Command): void {}
