"""labkit's version (leaf: read by provenance and `labkit --version`)."""
__version__ = "0.2.0"
