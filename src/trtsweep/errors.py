"""The one exception type whose message is shown to users as a one-line error."""


class TrtsweepError(Exception):
    """A problem with input or environment, explained in one line (no traceback shown)."""
