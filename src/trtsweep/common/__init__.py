"""Small helpers every stage may use: atomic files and digests, processes, container mounts, cache paths.

May import: trtsweep.errors.
"""
