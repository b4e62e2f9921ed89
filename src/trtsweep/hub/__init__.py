"""The download stage: a model from the Hugging Face Hub (or a mirror, or the bundled demo model) into the host's cache.

May import: trtsweep.errors, trtsweep.common.
"""
