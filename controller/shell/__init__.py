"""The Ryu shell: the only package that imports Ryu."""
