"""One module per kernel family (ops/<family>.py <-> kernels/<family>.cu); each defines `OPS`."""
