"""One module per op; each defines `OP` (see labkit.registry). Discovered automatically."""
